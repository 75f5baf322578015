"""codec.columns builds the same Arrow arrays as pyarrow's converters of Python values (which import pandas)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pulsarkit.codec.columns import (
    binary_array,
    column,
    int64_array,
    numpy_values,
    rows_table,
    scalar,
    string_array,
)

SCHEMA = pa.schema(
    [
        ("i64", pa.int64()),
        ("i32", pa.int32()),
        ("s", pa.string()),
        ("b", pa.binary()),
        ("flag", pa.bool_()),
        ("props", pa.map_(pa.string(), pa.string())),
    ]
)
_text = st.text(max_size=6)
_VALUES = {
    "i64": st.none() | st.integers(-(1 << 63), (1 << 63) - 1),
    "i32": st.none() | st.integers(-(1 << 31), (1 << 31) - 1),
    "s": st.none() | _text,
    "b": st.none() | st.binary(max_size=6),
    "flag": st.none() | st.booleans(),
    "props": st.none() | st.dictionaries(_text, _text, max_size=3),
}
_row = st.fixed_dictionaries({}, optional=_VALUES)


@settings(max_examples=200, deadline=None)
@given(st.lists(_row, max_size=12))
def test_rows_table_is_from_pylist(rows: list[dict]) -> None:
    got = rows_table(rows, SCHEMA)
    got.validate(full=True)
    assert got.equals(pa.Table.from_pylist(rows, schema=SCHEMA))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.none() | st.binary(max_size=20), max_size=30), st.integers(0, 5))
def test_binary_and_string_arrays_equal_pyarrows(values: list[bytes | None], cut: int) -> None:
    b = binary_array(values)
    assert b.type == pa.binary() and b.equals(pa.array(values, pa.binary()))
    texts = [None if v is None else v.hex() for v in values]
    s = string_array(texts)
    assert s.equals(pa.array(texts, pa.string()))
    assert b.slice(min(cut, len(values))).to_pylist() == values[min(cut, len(values)) :]


@given(st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=30))
def test_int64_array_and_numpy_values(values: list[int]) -> None:
    a = int64_array(values)
    assert a.equals(pa.array(values, pa.int64()))
    assert numpy_values(a).tolist() == values
    if values:
        assert numpy_values(a.slice(1)).tolist() == values[1:]


def test_numpy_values_refuses_nulls() -> None:
    with pytest.raises(ValueError, match="nulls"):
        numpy_values(pa.array([1, None]))


@pytest.mark.parametrize(
    ("value", "type"), [(1, pa.int64()), (-7, pa.int32()), (2.5, pa.float64()), (True, pa.bool_()), ("x", pa.string())]
)
def test_scalar_is_pyarrows(value: object, type: pa.DataType) -> None:
    assert scalar(value, type).equals(pa.scalar(value, type))  # type: ignore[arg-type]


def test_other_types_fall_back_to_pyarrow() -> None:
    assert column([1, None], pa.timestamp("ms")).equals(pa.array([1, None], pa.timestamp("ms")))
