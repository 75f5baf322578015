"""Arrow columns of Python values, built from buffers.

``pa.array``/``pa.scalar`` of Python objects (and ``Array.to_numpy``, ``Table.group_by``) make pyarrow import
pandas when it is installed, to check for a Series: 0.2-0.3 s of every read's start-up, and no read path
needs pandas (tests/test_imports.py checks that the read paths never load it)."""

from __future__ import annotations

import array
import operator
from collections.abc import Iterable, Sequence
from itertools import accumulate, repeat
from typing import cast

import numpy as np
import pyarrow as pa


def int64_array(values: Iterable[int]) -> pa.Int64Array:
    """An ``int64`` Arrow array of Python ints, built from a buffer: ``pa.array`` and ``pa.scalar`` of Python
    objects import pandas when it is installed (pyarrow checks for Series), 0.2-0.3 s of a read's start-up
    (bench/RESULTS.md, issue 24, "pandas at start-up"); no read path needs pandas."""
    buf = array.array("q", values)
    return pa.Array.from_buffers(pa.int64(), len(buf), [None, pa.py_buffer(buf)])


_TYPECODES = {"int64": "q", "int32": "i", "double": "d"}


def scalar(value: float | bool | str, type: pa.DataType) -> pa.Scalar:
    """An Arrow scalar of ``type`` (``bool``, ``int32``, ``int64``, ``float64``, ``string``), for compute
    arguments, without importing pandas (see :func:`int64_array`)."""
    return column([value], type)[0]


def binary_array(values: Sequence[bytes | None]) -> pa.Array:
    """A ``binary`` Arrow array of ``bytes`` (None: null; ``large_binary`` past 2 GiB), copied once, without
    importing pandas (see :func:`int64_array`)."""
    return _var_width(values, pa.binary(), pa.large_binary())


def string_array(values: Sequence[str | None]) -> pa.Array:
    """A ``string`` Arrow array of ``str`` (None: null), without importing pandas (see :func:`int64_array`)."""
    return _var_width([None if v is None else v.encode() for v in values], pa.string(), pa.large_string())


def _var_width(values: Sequence[bytes | None], small: pa.DataType, large: pa.DataType) -> pa.Array:
    validity = _validity(values)
    if validity is not None:
        values = [b"" if v is None else v for v in values]
    offsets = array.array("q", [0])
    offsets.extend(accumulate(map(len, values)))  # type: ignore[arg-type]
    big = offsets[-1] >= 1 << 31
    off = pa.py_buffer(offsets if big else array.array("i", offsets))
    data = pa.py_buffer(b"".join(values))  # type: ignore[arg-type]
    return pa.Array.from_buffers(large if big else small, len(values), [validity, off, data])


def numpy_values(values: pa.Array) -> np.ndarray:
    """The values of a null-free integer or float Arrow array as a numpy view (no copy), without importing
    pandas (``to_numpy`` does; see :func:`int64_array`)."""
    if values.null_count:
        raise ValueError("numpy_values: the array has nulls")
    dtype = np.dtype(str(values.type))
    return np.frombuffer(values.buffers()[1], dtype, len(values), values.offset * dtype.itemsize)


def _numbers(values: Sequence[float | None], type: pa.DataType) -> pa.Array:
    """An ``int32``/``int64``/``float64`` Arrow array (None: null)."""
    validity = _validity(values)
    # no validity bitmap: no None among the values
    numbers = [0 if v is None else v for v in values] if validity else cast("Sequence[float]", values)
    buf = array.array(_TYPECODES[str(type)], numbers)
    return pa.Array.from_buffers(type, len(values), [validity, pa.py_buffer(buf)])


def _bools(values: Sequence[bool | None]) -> pa.Array:
    """A ``bool`` Arrow array (None: null)."""
    bits = pa.py_buffer(np.packbits(np.array([bool(v) for v in values], np.bool_), bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), len(values), [_validity(values), bits])


def _validity(values: Sequence[object]) -> pa.Buffer | None:
    if not any(map(operator.is_, values, repeat(None))):  # identity only, in C: no Python step per value
        return None
    return pa.py_buffer(np.packbits(np.array([v is not None for v in values], np.bool_), bitorder="little"))


def column(values: Sequence[object], type: pa.DataType) -> pa.Array:
    """An Arrow array of ``type`` from Python values: built from buffers for the scalar types the message
    schema has (ints, doubles, bools, strings, bytes, string maps); ``pa.array`` for any other type."""
    if type in (pa.int64(), pa.int32(), pa.float64()):
        return _numbers(values, type)  # type: ignore[arg-type]
    if type == pa.bool_():
        return _bools(values)  # type: ignore[arg-type]
    if type == pa.string():
        return string_array(values)  # type: ignore[arg-type]
    if type == pa.binary():
        return binary_array(values)  # type: ignore[arg-type]
    if isinstance(type, pa.MapType) and type.key_type == pa.string() and type.item_type == pa.string():
        items = [dict(v) if v is not None else {} for v in values]  # type: ignore[call-overload]
        offsets = array.array("i", [0])
        offsets.extend(accumulate(len(m) for m in items))
        validity = _validity(values)
        keys = string_array([k for m in items for k in m])
        vals = string_array([x for m in items for x in m.values()])
        off = pa.Array.from_buffers(pa.int32(), len(offsets), [None, pa.py_buffer(offsets)])
        out = pa.MapArray.from_arrays(off, keys, vals, type=type)
        if validity is None:
            return out
        return pa.Array.from_buffers(type, len(values), [validity, *out.buffers()[1:2]], children=[out.values])
    return pa.array(values, type)


def rows_table(rows: Sequence[dict[str, object]], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema)`` (a missing key: null) without importing pandas."""
    return pa.Table.from_arrays([column([r.get(f.name) for r in rows], f.type) for f in schema], schema=schema)
