"""``export --decode schema --to delta|iceberg`` on the real standalone's schema topics (issue 23): each topic's
table, read back by independent readers (``deltalake``'s own reader for Delta, pyiceberg for Iceberg), equals the
Parquet decoded export, row for row and value for value, modulo the documented type adaptations
(:mod:`pulsarkit.export.tabletypes`: microseconds, unsigned widened, Delta's times as int64 microseconds).

The data is :mod:`test_schema_decode_real`'s oracle (its fixture and cache, unchanged)."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pulsarkit as pk
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pulsarkit.analysis.messages import messages_table
from pulsarkit.export import export
from pulsarkit.export.marks import MessageId
from pulsarkit.export.upsert import merge_key
from test_schema_decode_real import NS, schema_oracle  # noqa: F401 (the fixture, used by name)

pytestmark = [pytest.mark.interop, pytest.mark.slow]

#: AVRO (two versions: maps, nested structs, lists, nulls), KEY_VALUE SEPARATED (typed key, raw key kept),
#: INSTANT (nanoseconds with a zone), LOCAL_TIME (a time of day in nanoseconds), PROTOBUF_NATIVE (uint64, repeated
#: structs), INT64 (with its error row), PROTOBUF (a generated class: lists of structs, a nullable struct, error rows)
TOPICS = ["schema-avro", "schema-kv-separated", "schema-instant", "schema-local-time", "schema-protobuf-native",
          "schema-int64", "schema-protobuf"]  # fmt: skip
ORDER = [("ledger_id", "ascending"), ("entry_id", "ascending"), ("batch_index", "ascending")]


def _quiet(msg: str) -> None:
    pass


def _parquet(out: Path, name: str) -> pa.Table:
    (d,) = [x for x in out.iterdir() if x.name.startswith("topic=") and x.name.endswith(name)]
    return pa.concat_tables([pq.read_table(f) for f in sorted(d.rglob("*.parquet"))]).sort_by(ORDER)


def _delta(out: Path) -> pa.Table:
    from deltalake import DeltaTable

    return DeltaTable(str(out)).to_pyarrow_table().sort_by(ORDER)


def _iceberg(metadata: str) -> pa.Table:
    from pyiceberg.table import StaticTable

    return StaticTable.from_metadata(metadata).scan().to_arrow().sort_by(ORDER)


def _read(to: str, out: Path) -> pa.Table:
    """The table's current version, as its reader opens it (Iceberg: the newest metadata JSON)."""
    if to == "delta":
        return _delta(out)
    return _iceberg(str(sorted((out / "metadata").glob("*.metadata.json"))[-1]))


def _as(col: pa.ChunkedArray, ty: pa.DataType) -> pa.ChunkedArray:
    """The Parquet export's column in the table's type (a time of day as Delta's int64 microseconds)."""
    if pa.types.is_time(col.type) and ty == pa.int64():
        return col.cast(pa.time64("us"), safe=False).cast(pa.int64())
    if pa.types.is_timestamp(col.type) and col.type.unit == "ns":  # floored to the microsecond
        us = [None if v is None else v // 1000 for v in col.cast(pa.int64()).to_pylist()]
        return pa.chunked_array([pa.array(us, pa.int64())]).cast(ty)
    return col.cast(ty, safe=False)


def _same(parquet: pa.Table, table: pa.Table, where: str) -> None:
    assert table.num_rows == parquet.num_rows, where
    assert set(table.column_names) == {*parquet.column_names, "topic", "date"}, where
    for name in parquet.column_names:
        want = _as(parquet.column(name), table.schema.field(name).type).to_pylist()
        assert table.column(name).to_pylist() == want, f"{where}: {name}"


def test_delta_and_iceberg_tables_equal_the_parquet_export(schema_oracle, tmp_path):  # noqa: F811
    data = schema_oracle / "data"
    pq_out = tmp_path / "parquet"
    s = export(str(data), "parquet", str(pq_out), topics=[NS + t for t in TOPICS], decode="schema", log=_quiet)
    assert s.issues == []
    for name in TOPICS:
        parquet = _parquet(pq_out, name)
        d = export(str(data), "delta", str(tmp_path / f"d-{name}"), topics=[NS + name], decode="schema", log=_quiet)
        i = export(str(data), "iceberg", str(tmp_path / f"i-{name}"), topics=[NS + name], decode="schema", log=_quiet)
        assert d.rows == i.rows == parquet.num_rows > 0
        delta, iceberg = _delta(tmp_path / f"d-{name}"), _iceberg(str(i.metadata))
        for table, fmt in ((delta, "delta"), (iceberg, "iceberg")):
            _same(parquet, table, f"{name} {fmt}")
            assert set(table.column("topic").to_pylist()) == {NS + name}
            days = {dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc).strftime("%Y-%m-%d") for t in
                    parquet.column("publish_time").to_pylist()}  # fmt: skip
            assert set(table.column("date").to_pylist()) == days
        # the documented adaptations, seen on the values
        value = parquet.schema.field("value").type
        if value == pa.timestamp("ns", tz="UTC"):
            assert delta.schema.field("value").type == iceberg.schema.field("value").type == pa.timestamp("us", "UTC")
            ns = parquet.column("value").cast(pa.int64()).to_pylist()
            assert delta.column("value").cast(pa.int64()).to_pylist() == [n // 1000 for n in ns]
        if pa.types.is_time(value):
            ns = parquet.column("value").cast(pa.int64()).to_pylist()
            assert delta.column("value").to_pylist() == [n // 1000 for n in ns]
            assert iceberg.schema.field("value").type == pa.time64("us")
        if name == "schema-protobuf-native":
            big = [v["big"] for v in parquet.column("value").to_pylist() if v is not None]
            got = [v["big"] for v in delta.column("value").to_pylist() if v is not None]
            assert got == [None if b is None else decimal.Decimal(b) for b in big] and max(filter(None, big)) > 0
        if name == "schema-int64":  # the payload that does not match: an error row with its bytes, in both
            for table in (delta, iceberg):
                (err,) = [r for r in table.to_pylist() if r["decode_error"] is not None]
                assert err["value"] is None and err["payload"] == b"\x01\x02\x03" and "INT64" in err["decode_error"]
        if name == "schema-protobuf":  # the rows setting a field the stored schema has no numbers for are errors
            for table in (delta, iceberg):
                rows = table.to_pylist()
                errors = [r for r in rows if r["decode_error"] is not None]
                assert len(errors) == 10 and all(r["value"] is None and r["payload"] for r in errors)
                typed = [r["value"] for r in rows if r["decode_error"] is None]
                assert len(typed) == 11 and all(v["counts"] == [] and v["address"] is None for v in typed)
        if name == "schema-avro":  # nulls and maps survive
            rows = delta.column("value").to_pylist()
            assert any(r is None for r in rows) and any(r is not None and r["counts"] for r in rows)
        if name == "schema-kv-separated":
            assert delta.schema.field("key").type == pa.string() and "partition_key" in delta.column_names


@pytest.mark.parametrize("to", ["delta", "iceberg"])
def test_an_incremental_decoded_export_appends_only_the_new_messages(schema_oracle, tmp_path, to):  # noqa: F811
    """A backfill stopped inside a batch, then the rest, then nothing: the table equals one Parquet export."""
    data, topic = schema_oracle / "data", NS + "schema-avro"
    pq_out = tmp_path / "parquet"
    export(str(data), "parquet", str(pq_out), topics=[topic], decode="schema", log=_quiet)
    parquet = _parquet(pq_out, "schema-avro")
    batched = [r for r in parquet.select(["ledger_id", "entry_id", "batch_index"]).to_pylist() if r["batch_index"] > 0]
    cut = MessageId(batched[0]["ledger_id"], batched[0]["entry_id"], 0)  # the first message of a batch
    out = tmp_path / to
    first = export(str(data), to, str(out), topics=[topic], decode="schema", until={topic: cut}, log=_quiet)
    rest = export(str(data), to, str(out), topics=[topic], decode="schema", log=_quiet)
    again = export(str(data), to, str(out), topics=[topic], decode="schema", log=_quiet)
    assert 0 < first.rows < parquet.num_rows and first.rows + rest.rows == parquet.num_rows and again.rows == 0
    _same(parquet, _read(to, out), to)
    # one kind of row per export, one schema per table, one mode
    with pytest.raises(pk.PulsarkitError, match="--decode schema, not bytes"):
        export(str(data), to, str(out), topics=[topic], log=_quiet)
    with pytest.raises(pk.PulsarkitError, match="do not fit"):
        export(str(data), to, str(out), topics=[NS + "schema-json"], decode="schema", log=_quiet)
    with pytest.raises(pk.PulsarkitError, match="in mode append, not upsert"):
        export(str(data), to, str(out), topics=[topic], decode="schema", mode="upsert", log=_quiet)
    _same(parquet, _read(to, out), f"{to} after the refused runs")  # they left the table as it was


@pytest.mark.parametrize("to", ["delta", "iceberg"])
@pytest.mark.parametrize("name", ["schema-avro", "schema-kv-separated"])
def test_a_decoded_upsert_table_equals_the_parquet_one(schema_oracle, tmp_path, to, name):  # noqa: F811
    """``--mode upsert --decode schema``: AVRO records (structs, maps; a null value deletes its key) and KEY_VALUE
    SEPARATED (kept by the message's own key, ``partition_key``; ``key`` is the typed key); a backfill, then the
    rest, equals one Parquet upsert export."""
    data, topic = schema_oracle / "data", NS + name
    pq_out = tmp_path / "parquet"
    export(str(data), "parquet", str(pq_out), topics=[topic], decode="schema", mode="upsert", log=_quiet)
    parquet = _parquet(pq_out, name)
    with pk.open_data_dir(data) as dd:
        every = messages_table(dd, topic).sort_by(ORDER)
    keyed = every.filter(every.column("key").is_valid()).to_pylist()
    latest = {r["key"]: r for r in keyed}  # the latest message per key; a null value deletes the key
    kept = sorted(k for k, r in latest.items() if not r["null_value"])
    assert sorted(parquet.column(merge_key(parquet.column_names)).to_pylist()) == kept and kept
    if name == "schema-avro":
        assert len(kept) < len(latest)  # the tombstone
    out = tmp_path / to
    half = every.slice(every.num_rows // 2, 1).to_pylist()[0]
    until = MessageId(half["ledger_id"], half["entry_id"], -1)
    first = export(str(data), to, str(out), topics=[topic], decode="schema", mode="upsert", until={topic: until},
                   log=_quiet)  # fmt: skip
    assert 0 < first.rows
    second = export(str(data), to, str(out), topics=[topic], decode="schema", mode="upsert", log=_quiet)
    assert second.warnings == []  # continued from the first run's mark: only the rest read
    _same(parquet, _read(to, out), f"{to} upsert")
    assert export(str(data), to, str(out), topics=[topic], decode="schema", mode="upsert", log=_quiet).rows == 0


def test_the_command_writes_a_decoded_table_and_refuses_topics_of_two_schemas(schema_oracle, tmp_path, capsys):  # noqa: F811
    from pulsarkit.cli import main

    data = schema_oracle / "data"
    out = tmp_path / "json"
    assert main(["export", str(data), "--to", "delta", str(out), "--decode", "schema", "--topic", "schema-json"]) == 0
    got = _delta(out)
    assert got.num_rows == 31 and got.schema.field("value").type.get_field_index("nicknames") >= 0
    capsys.readouterr()
    two = ["--topic", "schema-json", "--topic", "schema-avro"]
    assert main(["export", str(data), "--to", "iceberg", str(tmp_path / "two"), "--decode", "schema", *two]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "one table of one schema" in err[0] and "schema-avro" in err[0], err
    assert not (tmp_path / "two" / "metadata").exists()
