"""Pulsar's primitive schemas, decoded a column at a time.

The payload layouts (Pulsar's ``Schema.*`` of the Java client): ``STRING`` the text (UTF-8, or the charset its
``__charset`` property names), ``BYTES`` (and ``NONE``) the bytes themselves, ``BOOLEAN`` one byte (any non-zero is
true), ``INT8``/``INT16``/``INT32``/``INT64`` big-endian two's complement of 1, 2, 4, 8 bytes, ``FLOAT``/``DOUBLE``
big-endian IEEE 754 of 4 and 8 bytes; the temporal ones over big-endian longs: ``DATE``, ``TIME`` and
``TIMESTAMP`` milliseconds since the epoch (``java.util.Date``, ``java.sql.Time``, ``java.sql.Timestamp``: an
instant, kept as ``timestamp[ms, UTC]``), ``INSTANT`` 12 bytes (the epoch second, 8, then the nanosecond, 4),
``LOCAL_DATE`` the epoch day, ``LOCAL_TIME`` the nanosecond of the day, ``LOCAL_DATE_TIME`` 16 bytes (the epoch day,
then the nanosecond of the day).

Fixed-width payloads are read with one numpy view over the payload column's data; a payload of another size,
or a value Arrow's type cannot hold (an instant beyond ``timestamp[ns]``, a nanosecond of the day past the
day), is that row's error, never a guess."""

from __future__ import annotations

import codecs
from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from ...lazy import deferred
from .info import BYTES_TYPES

pc = deferred("pyarrow.compute")

NANOS_PER_DAY = 86_400_000_000_000
#: the type name -> (Arrow type, payload size or None, numpy dtype of the payload)
PRIMITIVES: dict[str, tuple[pa.DataType, int | None, str | None]] = {
    "STRING": (pa.string(), None, None),
    "BOOLEAN": (pa.bool_(), 1, "u1"),
    "INT8": (pa.int8(), 1, "i1"),
    "INT16": (pa.int16(), 2, ">i2"),
    "INT32": (pa.int32(), 4, ">i4"),
    "INT64": (pa.int64(), 8, ">i8"),
    "FLOAT": (pa.float32(), 4, ">f4"),
    "DOUBLE": (pa.float64(), 8, ">f8"),
    "DATE": (pa.timestamp("ms", tz="UTC"), 8, ">i8"),
    "TIME": (pa.timestamp("ms", tz="UTC"), 8, ">i8"),
    "TIMESTAMP": (pa.timestamp("ms", tz="UTC"), 8, ">i8"),
    "INSTANT": (pa.timestamp("ns", tz="UTC"), 12, None),
    "LOCAL_DATE": (pa.date32(), 8, ">i8"),
    "LOCAL_TIME": (pa.time64("ns"), 8, ">i8"),
    "LOCAL_DATE_TIME": (pa.timestamp("ns"), 16, None),
    **{t: (pa.binary(), None, None) for t in BYTES_TYPES},
}
_INSTANT = np.dtype([("s", ">i8"), ("n", ">i4")])
_LOCAL_DATE_TIME = np.dtype([("d", ">i8"), ("n", ">i8")])
_I64 = (-(1 << 63), (1 << 63) - 1)


class PrimitiveCodec:
    """One primitive type's decoder (:data:`PRIMITIVES`)."""

    def __init__(self, type_name: str, properties: Mapping[str, str] | None = None) -> None:
        self.name = type_name
        self.type, self.width, dtype = PRIMITIVES[type_name]
        self.dtype = np.dtype(dtype) if dtype else None
        charset = (properties or {}).get("__charset")
        self.charset = None
        if charset and type_name == "STRING":
            try:
                name = codecs.lookup(charset).name
            except LookupError:
                name = charset  # every payload fails with the charset's name
            self.charset = None if name == "utf-8" else name

    def decode(self, payloads: pa.Array) -> tuple[pa.Array, list[str | None]]:
        """``payloads`` (binary, null for no value) as this type, with each row's error (None when it decoded)."""
        payloads = _binary(payloads)
        n = len(payloads)
        errors: list[str | None] = [None] * n
        if self.name in BYTES_TYPES:
            return payloads, errors
        if self.name == "STRING":
            return self._string(payloads, errors), errors
        assert self.width is not None
        lengths = pc.binary_length(payloads)
        good = pc.fill_null(pc.equal(lengths, self.width), False).to_numpy(zero_copy_only=False)
        wrong = pc.and_(pc.is_valid(payloads), pc.invert(pa.array(good)))
        for i in pc.indices_nonzero(pc.fill_null(wrong, False)).to_pylist():
            errors[i] = f"{self.name} needs {self.width} bytes, got {lengths[i].as_py()}"
        raw = _fixed(payloads.filter(pa.array(good)), self.width)
        ok = np.ones(len(raw), dtype=bool)
        values = self._values(raw, ok)
        if not ok.all():  # values the type cannot hold: errors too
            where = np.flatnonzero(good)
            for j in np.flatnonzero(~ok):
                errors[int(where[j])] = f"{self.name}: {self._why(raw[j : j + 1])}"
            good = good.copy()
            good[where[~ok]] = False
            values = values.filter(pa.array(ok))
        return _scatter(values, good, self.type), errors

    def _values(self, raw: np.ndarray, ok: np.ndarray) -> pa.Array:
        name = self.name
        if name == "INSTANT":
            rec = raw.view(_INSTANT).reshape(-1)
            s, ns = rec["s"].astype(np.int64), rec["n"].astype(np.int64)
            # the nanosecond count must fit in 64 bits: checked exactly on the few seconds near the limits
            near = np.abs(s) > 9_000_000_000
            for j in np.flatnonzero(near):
                total = int(s[j]) * 1_000_000_000 + int(ns[j])
                ok[j] = _I64[0] <= total <= _I64[1]
            s = np.where(ok, s, 0)
            return pa.array(s * 1_000_000_000 + np.where(ok, ns, 0), self.type)
        if name == "LOCAL_DATE_TIME":
            rec = raw.view(_LOCAL_DATE_TIME).reshape(-1)
            d, ns = rec["d"].astype(np.int64), rec["n"].astype(np.int64)
            ok &= (ns >= 0) & (ns < NANOS_PER_DAY) & (np.abs(d) <= 106_000)
            return pa.array(np.where(ok, d, 0) * NANOS_PER_DAY + np.where(ok, ns, 0), self.type)
        assert self.dtype is not None
        v = raw.view(self.dtype).reshape(-1).astype(self.dtype.newbyteorder("="))
        if name == "BOOLEAN":
            return pa.array(v != 0, self.type)
        if name == "LOCAL_DATE":
            ok &= (v >= -(1 << 31)) & (v < 1 << 31)
            return pa.array(np.where(ok, v, 0).astype(np.int32), self.type)
        if name == "LOCAL_TIME":
            ok &= (v >= 0) & (v < NANOS_PER_DAY)
            return pa.array(np.where(ok, v, 0), self.type)
        return pa.array(v, self.type)

    def _why(self, raw: np.ndarray) -> str:
        if self.name == "INSTANT":
            v = raw.view(_INSTANT).reshape(-1)[0]
            return f"{int(v['s'])} s + {int(v['n'])} ns is outside timestamp[ns]'s range"
        if self.name == "LOCAL_DATE_TIME":
            v = raw.view(_LOCAL_DATE_TIME).reshape(-1)[0]
            return f"epoch day {int(v['d'])}, nanosecond {int(v['n'])} of the day is outside timestamp[ns]'s range"
        assert self.dtype is not None
        v = int(raw.view(self.dtype).reshape(-1)[0])
        return (
            f"epoch day {v} is outside date32's range"
            if self.name == "LOCAL_DATE"
            else f"{v} is no nanosecond of a day"
        )

    def _string(self, payloads: pa.Array, errors: list[str | None]) -> pa.Array:
        if self.charset is None:
            try:
                return payloads.cast(pa.string())  # Arrow checks the UTF-8 of the whole column at once
            except pa.ArrowInvalid:
                pass
        out: list[str | None] = []
        for i, p in enumerate(payloads.to_pylist()):
            if p is None:
                out.append(None)
                continue
            try:
                out.append(p.decode(self.charset or "utf-8"))
            except (UnicodeDecodeError, LookupError) as e:
                errors[i] = f"STRING: not {self.charset or 'UTF-8'} text: {e}"
                out.append(None)
        return pa.array(out, pa.string())


def _binary(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    return a if a.type == pa.binary() else a.cast(pa.binary())


def _fixed(a: pa.Array, width: int) -> np.ndarray:
    """The bytes of a binary column whose every value has ``width`` bytes, one row per line (no copy)."""
    n = len(a)
    if n == 0:
        return np.zeros((0, width), dtype=np.uint8)
    offsets = np.frombuffer(a.buffers()[1], dtype=np.int32, count=n + 1, offset=a.offset * 4)
    data = np.frombuffer(a.buffers()[2], dtype=np.uint8, count=int(offsets[-1] - offsets[0]), offset=int(offsets[0]))
    return data.reshape(n, width)


def _scatter(values: pa.Array, mask: np.ndarray, type_: pa.DataType) -> pa.Array:
    """``values`` (one per true in ``mask``) at the true rows of ``mask``, null elsewhere."""
    if mask.all():
        return values
    if not len(values):
        return pa.nulls(len(mask), type_)
    idx = np.cumsum(mask) - 1
    return values.take(pa.array(idx, mask=~mask))


__all__ = ["PRIMITIVES", "PrimitiveCodec"]
