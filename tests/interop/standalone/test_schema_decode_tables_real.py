"""``export --decode schema --to delta|iceberg`` on the real standalone's schema topics (issue 23): each topic's
table, read back by independent readers (``deltalake``'s own reader for Delta, pyiceberg for Iceberg), equals the
Parquet decoded export, row for row and value for value, modulo the documented type adaptations
(:mod:`pulsarkit.export.tabletypes`: microseconds, unsigned widened, Delta's times as int64 microseconds).

The data is :mod:`test_schema_decode_real`'s oracle (its fixture and cache, unchanged). Its ``schema-avro`` topic's
schema evolves (version 1 adds ``score``): a table first exported when the registry held only version 0 (the runs
are shown the registry as it was then), then continued with version 1, evolves, and equals the one-run export."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import pulsarkit as pk
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pulsarkit.analysis.decoded import history_versions
from pulsarkit.analysis.messages import messages_table
from pulsarkit.codec.schema import SchemaInfo, TopicSchema
from pulsarkit.export import export, run
from pulsarkit.export.marks import MessageId
from pulsarkit.export.run import committed_marks
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


# ------------------------------------------------------------------------------------------ schema evolution

AVRO = NS + "schema-avro"


def _registry(monkeypatch, edit) -> None:
    """The export's runs see ``schema-avro``'s registry as ``edit`` makes its versions (``None``: as it is)."""
    real = history_versions

    def as_of(dd, topic):
        versions = real(dd, [topic])
        return TopicSchema(versions if edit is None else edit(versions))

    monkeypatch.setattr(run, "topic_schema", as_of)


def _only_v0(versions):
    """The registry before version 1 was registered."""
    return versions[:1]


def _inner_x(to_type: str, version: int):
    """The registry with ``inner.x`` (an Avro ``int``) declared ``to_type`` in ``version`` (the same varint)."""

    def edit(versions):
        out = []
        for info, deleted in versions:
            if info.version == version:
                d = bytes(info.definition).replace(
                    b'{"name":"x","type":"int"}', f'{{"name":"x","type":"{to_type}"}}'.encode()
                )
                assert d != bytes(info.definition)
                info = SchemaInfo(info.type, d, info.properties, info.version)
            out.append((info, deleted))
        return out

    return edit


def _last_v0(data: Path) -> MessageId:
    """The last message written with version 0 (the next ones are version 1's)."""
    with pk.open_data_dir(data) as dd:
        rows = messages_table(dd, [AVRO]).sort_by(ORDER).to_pylist()
    v0 = [r for r in rows if r["schema_version"] == bytes(8)]
    assert 0 < len(v0) < len(rows) and all(r["schema_version"] == (1).to_bytes(8, "big") for r in rows[len(v0) :])
    return MessageId(v0[-1]["ledger_id"], v0[-1]["entry_id"], -1)


def _duckdb_delta(out: Path) -> pa.Table:
    """The Delta table's active data files (the log's, through deltalake) read by DuckDB, by column name (the files
    of the first run lack ``score``: DuckDB's ``union_by_name`` gives nulls there), partitions from the paths."""
    import duckdb
    from deltalake import DeltaTable

    files = [u.removeprefix("file://") for u in DeltaTable(str(out)).file_uris()]
    got = duckdb.connect().read_parquet(files, union_by_name=True, hive_partitioning=True)
    return got.to_arrow_table().sort_by(ORDER)


@pytest.mark.parametrize("to", ["delta", "iceberg"])
def test_a_new_schema_version_evolves_the_table(schema_oracle, tmp_path, monkeypatch, to):  # noqa: F811
    """Version 0's messages exported while the registry held only version 0, then the rest with version 1 (which adds
    ``score``): the table gains the column in the second run's commit, the first run's rows hold nulls there, and
    read back by independent readers it equals the Parquet export of the whole topic in one run."""
    data = schema_oracle / "data"
    export(str(data), "parquet", str(tmp_path / "parquet"), topics=[AVRO], decode="schema", log=_quiet)
    parquet = _parquet(tmp_path / "parquet", "schema-avro")
    out = tmp_path / to
    _registry(monkeypatch, _only_v0)
    first = export(str(data), to, str(out), topics=[AVRO], decode="schema", until={AVRO: _last_v0(data)}, log=_quiet)
    assert "score" not in _read(to, out).schema.field("value").type.names
    assert committed_marks(str(out))[1].schema_versions == {AVRO: 0}
    _registry(monkeypatch, None)
    rest = export(str(data), to, str(out), topics=[AVRO], decode="schema", log=_quiet)
    assert first.rows + rest.rows == parquet.num_rows and first.rows > 0 and rest.rows > 0
    assert committed_marks(str(out))[1].schema_versions == {AVRO: 1}
    table = _read(to, out)
    _same(parquet, table, f"{to} evolved")
    scores = [v["score"] for v in table.column("value").to_pylist() if v is not None]
    assert scores[: first.rows - 1] == [None] * (first.rows - 1) and any(x is not None for x in scores)
    if to == "delta":
        _same(parquet, _duckdb_delta(out), "delta by DuckDB")
    assert export(str(data), to, str(out), topics=[AVRO], decode="schema", log=_quiet).rows == 0


def test_parquet_keeps_each_runs_schema_and_readers_merge_them(schema_oracle, tmp_path, monkeypatch):  # noqa: F811
    """Parquet writes each run's files with the schema of that run: merged by name they are the one-run export."""
    data = schema_oracle / "data"
    export(str(data), "parquet", str(tmp_path / "whole"), topics=[AVRO], decode="schema", log=_quiet)
    whole = _parquet(tmp_path / "whole", "schema-avro")
    out = tmp_path / "runs"
    _registry(monkeypatch, _only_v0)
    export(str(data), "parquet", str(out), topics=[AVRO], decode="schema", until={AVRO: _last_v0(data)}, log=_quiet)
    _registry(monkeypatch, None)
    export(str(data), "parquet", str(out), topics=[AVRO], decode="schema", log=_quiet)
    files = [pq.read_table(f) for f in sorted(out.rglob("*.parquet"))]
    assert len({f.schema for f in files}) == 2
    merged = pa.concat_tables(files, promote_options="permissive").sort_by(ORDER)
    assert merged.to_pylist() == whole.to_pylist()


@pytest.mark.parametrize("to", ["delta", "iceberg"])
def test_a_widened_field_evolves_iceberg_and_is_refused_by_delta(schema_oracle, tmp_path, monkeypatch, to):  # noqa: F811
    """``inner.x`` an ``int`` in version 0 and a ``long`` in version 1 (Avro promotes it): Iceberg widens the column;
    deltalake cannot, so the Delta run is refused before it writes, naming both versions and the column."""
    data = schema_oracle / "data"
    widened = _inner_x("long", 1)
    _registry(monkeypatch, widened)
    export(str(data), "parquet", str(tmp_path / "parquet"), topics=[AVRO], decode="schema", log=_quiet)
    parquet = _parquet(tmp_path / "parquet", "schema-avro")
    out = tmp_path / to
    _registry(monkeypatch, _only_v0)
    export(str(data), to, str(out), topics=[AVRO], decode="schema", until={AVRO: _last_v0(data)}, log=_quiet)
    before = _read(to, out)
    _registry(monkeypatch, widened)
    if to == "delta":
        with pytest.raises(pk.PulsarkitError, match=r"schema version 1 .* schema version 0: column value\.inner\.x: "
                           r"the table's int32 cannot become int64 \(a widening a Delta table"):  # fmt: skip
            export(str(data), to, str(out), topics=[AVRO], decode="schema", log=_quiet)
        assert _read(to, out).equals(before)  # nothing written
        return
    export(str(data), to, str(out), topics=[AVRO], decode="schema", log=_quiet)
    table = _read(to, out)
    assert table.schema.field("value").type.field("inner").type.field("x").type == pa.int64()
    _same(parquet, table, "iceberg widened")


@pytest.mark.parametrize("to", ["delta", "iceberg"])
def test_a_narrowed_field_is_refused_naming_both_versions(schema_oracle, tmp_path, monkeypatch, to):  # noqa: F811
    """``inner.x`` a ``long`` in version 0 and an ``int`` in version 1 (no Avro reader reads the one as the other):
    the second run is refused before anything is written, naming the column and both versions."""
    data = schema_oracle / "data"
    out = tmp_path / to
    _registry(monkeypatch, lambda v: _inner_x("long", 0)(v)[:1])
    export(str(data), to, str(out), topics=[AVRO], decode="schema", until={AVRO: _last_v0(data)}, log=_quiet)
    before = _read(to, out)
    _registry(monkeypatch, None)
    with pytest.raises(pk.PulsarkitError, match=r"schema-avro's schema version 1 does not evolve the .* table written "
                       r"with its schema version 0: column value\.inner\.x: the table's int64 cannot become int32 "
                       r"\(the type is narrowed\)"):  # fmt: skip
        export(str(data), to, str(out), topics=[AVRO], decode="schema", log=_quiet)
    assert _read(to, out).equals(before)
    assert committed_marks(str(out))[1].schema_versions == {AVRO: 0}


@pytest.mark.parametrize("to", ["delta", "iceberg"])
def test_an_upsert_table_evolves_too(schema_oracle, tmp_path, monkeypatch, to):  # noqa: F811
    """``--mode upsert``: the MERGE (Delta) or the delete and upsert (Iceberg) evolve the table in their commit."""
    data = schema_oracle / "data"
    export(str(data), "parquet", str(tmp_path / "parquet"), topics=[AVRO], decode="schema", mode="upsert", log=_quiet)
    parquet = _parquet(tmp_path / "parquet", "schema-avro")
    out = tmp_path / to
    _registry(monkeypatch, _only_v0)
    until = {AVRO: _last_v0(data)}
    export(str(data), to, str(out), topics=[AVRO], decode="schema", mode="upsert", until=until, log=_quiet)
    _registry(monkeypatch, None)
    export(str(data), to, str(out), topics=[AVRO], decode="schema", mode="upsert", log=_quiet)
    table = _read(to, out)
    assert "score" in table.schema.field("value").type.names
    _same(parquet, table, f"{to} upsert evolved")


@pytest.mark.spark
@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_the_spark_engine_writes_the_local_engines_decoded_tables(schema_oracle, spark, tmp_path, to):  # noqa: F811
    """``--engine spark --decode schema``: each topic's rows decoded in Spark's tasks (the topic's schema shipped to
    them), the same table as the local engine's, column for column (nested records, maps, uint64, nanoseconds)."""
    from pulsarkit.spark import export as spark_export

    data = schema_oracle / "data"
    for name in TOPICS:
        outs = {e: tmp_path / f"{name}-{e}" for e in ("local", "spark")}
        for engine, out in outs.items():
            s = spark_export.export(str(data), to, str(out), topics=[NS + name], decode="schema", engine=engine,
                                    spark=spark, log=_quiet)  # fmt: skip
            assert s.engine == engine and s.rows > 0
        if to == "parquet":
            local, on_spark = _parquet(outs["local"], name), _parquet(outs["spark"], name)
        else:
            local, on_spark = _read(to, outs["local"]), _read(to, outs["spark"])
        assert on_spark.schema == local.schema and on_spark.to_pylist() == local.to_pylist(), (name, to)
