"""The decoded Arrow types as Delta and Iceberg tables store them (:mod:`pulsarkit.export.tabletypes`)."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest
from pulsarkit.errors import PulsarkitError
from pulsarkit.export.tabletypes import Incompatible, conform, evolved_schema, same_schema, table_schema, to_table_types

NS_UTC = pa.timestamp("ns", tz="UTC")
INNER = pa.struct([("at", NS_UTC), ("big", pa.uint64()), ("t", pa.time64("ns")), ("small", pa.int8())])
SCHEMA = pa.schema(
    [
        ("value", INNER),
        ("many", pa.list_(NS_UTC)),
        ("by", pa.map_(pa.string(), pa.timestamp("ns"))),
        ("local", pa.timestamp("ms")),
        ("decode_error", pa.string()),
    ]
)
ROWS = [
    {
        "value": {"at": -4_999_999_500, "big": 2**64 - 1, "t": 3_600_000_000_999, "small": -3},
        "many": [1_999, -1, None],
        "by": [("a", -1_500)],
        "local": 5,
        "decode_error": None,
    },
    {"value": None, "many": None, "by": None, "local": None, "decode_error": "no INT64: 3 bytes"},
]


def test_the_types_each_format_stores():
    delta, iceberg = table_schema(SCHEMA, "delta"), table_schema(SCHEMA, "iceberg")
    assert delta.field("value").type == pa.struct(
        [("at", pa.timestamp("us", "UTC")), ("big", pa.decimal128(20, 0)), ("t", pa.int64()), ("small", pa.int8())]
    )
    us_utc = pa.timestamp("us", "UTC")
    assert iceberg.field("value").type == pa.struct(
        [("at", us_utc), ("big", pa.decimal128(20, 0)), ("t", pa.time64("us")), ("small", pa.int32())]
    )
    assert delta.field("local").type == iceberg.field("local").type == pa.timestamp("us")
    assert delta.field("by").type.item_type == pa.timestamp("us")


@pytest.mark.parametrize("to", ["delta", "iceberg"])
def test_values_floor_nanoseconds_and_keep_nulls(to):
    t = pa.Table.from_pylist(ROWS, schema=SCHEMA)
    got = to_table_types(t, to)
    assert got.schema == table_schema(SCHEMA, to)
    first, second = got.to_pylist()
    as_ints = pa.struct(
        [("at", pa.int64()), ("big", pa.decimal128(20, 0)), ("t", got.schema.field("value").type[2].type),
         ("small", pa.int32())]
    )  # fmt: skip
    v = got.column("value").cast(as_ints).to_pylist()[0]
    assert v["at"] == -5_000_000 and v["big"] == decimal.Decimal(2**64 - 1)  # floored, not toward 1970; exact
    assert got.column("many").cast(pa.list_(pa.int64())).to_pylist()[0] == [1, -1, None]
    assert got.column("by").cast(pa.map_(pa.string(), pa.int64())).to_pylist()[0] == [("a", -2)]
    if to == "delta":
        assert first["value"]["t"] == 3_600_000_000  # microseconds since midnight
    assert second == {"value": None, "many": None, "by": None, "local": None, "decode_error": "no INT64: 3 bytes"}


@pytest.mark.parametrize("ty", [pa.null(), pa.decimal256(40, 0), pa.duration("s")])
def test_what_a_table_cannot_hold_is_refused_naming_the_column(ty):
    with pytest.raises(PulsarkitError, match=r"column value\.x"):
        table_schema(pa.schema([("value", pa.struct([("x", ty)]))]), "delta")


# ------------------------------------------------------------------------------------------ schema evolution

V1 = pa.schema(
    [
        ("topic", pa.string()),
        ("value", pa.struct([("id", pa.int64()), ("n", pa.int32()), ("gone", pa.string())])),
        ("date", pa.string()),
    ]
)
#: the next version: ``gone`` removed, ``score`` added (nested and at the top), ``n`` widened
V2 = pa.schema(
    [
        ("topic", pa.string()),
        ("value", pa.struct([("id", pa.int64()), ("score", pa.float64()), ("n", pa.int64())])),
        ("extra", pa.list_(pa.int32())),
        ("date", pa.string()),
    ]
)


def test_iceberg_evolves_by_name_keeping_removed_fields_and_widening():
    got = evolved_schema(V1, V2, "iceberg")
    value = pa.struct([("id", pa.int64()), ("n", pa.int64()), ("gone", pa.string()), ("score", pa.float64())])
    assert got == pa.schema([("topic", pa.string()), ("value", value), ("date", pa.string()), ("extra", V2[2].type)])
    rows = pa.Table.from_pylist([{"topic": "t", "value": {"id": 1, "score": 0.5, "n": 1 << 40}, "date": "d"}], V2)
    assert conform(rows, got).to_pylist() == [
        {"topic": "t", "value": {"id": 1, "n": 1 << 40, "gone": None, "score": 0.5}, "date": "d", "extra": None}
    ]
    # the table as its reader gives it (large strings, Iceberg's list items, "+00:00") is the same schema
    read = pa.schema(
        [("topic", pa.large_string()), ("at", pa.timestamp("us", "+00:00")), ("l", pa.large_list(pa.int8()))]
    )
    mine = pa.schema([("topic", pa.string()), ("at", pa.timestamp("us", "UTC")), ("l", pa.list_(pa.int8()))])
    assert same_schema(read, mine) and not same_schema(read, V1)


def test_delta_adds_fields_but_widens_nothing():
    added = V2.set(1, pa.field("value", pa.struct([("id", pa.int64()), ("score", pa.float64()), ("n", pa.int32())])))
    got = evolved_schema(V1, added, "delta")
    assert got.field("value").type.names == ["id", "n", "gone", "score"]
    with pytest.raises(Incompatible, match=r"column value\.n: .*int32 cannot become int64 .*Delta") as e:
        evolved_schema(V1, V2, "delta")
    assert (e.value.column, e.value.old, e.value.new) == ("value.n", pa.int32(), pa.int64())


@pytest.mark.parametrize("to", ["delta", "iceberg"])
@pytest.mark.parametrize(
    ("old", "new", "column", "why"),
    [
        (pa.int64(), pa.int32(), "value.n", "narrowed"),
        (pa.float64(), pa.float32(), "value.n", "narrowed"),
        (pa.decimal128(10, 2), pa.decimal128(9, 2), "value.n", "narrowed"),
        (pa.int32(), pa.string(), "value.n", "no .* schema evolution"),
        (pa.string(), pa.binary(), "value.n", "no .* schema evolution"),
        (pa.list_(pa.int64()), pa.list_(pa.int32()), r"value\.n\[\]", "narrowed"),
        (pa.map_(pa.string(), pa.int32()), pa.map_(pa.int32(), pa.int32()), r"value\.n \(key\)", "key type"),
    ],
)
def test_an_incompatible_change_is_refused_naming_the_column(to, old, new, column, why):
    def schema(t):
        return pa.schema([("value", pa.struct([("n", t)]))])

    with pytest.raises(Incompatible, match=f"column {column}: .*{why}"):
        evolved_schema(schema(old), schema(new), to)
