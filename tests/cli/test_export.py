"""``pulsarkit export``: incremental Parquet, Delta and Iceberg exports of a data directory pulsarkit's
own writer (the embedded managed-ledger factory) keeps appending to; the local and Spark engines agree."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pulsarkit as pk
import pyarrow.dataset as ds
import pytest
from pulsarkit import export as px
from pulsarkit.analysis.messages import read_message_rows
from pulsarkit.cli import main
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.spark import export as export_mod

ORDERS = "public/default/persistent/orders"
EVENTS = "public/default/persistent/events-partition-0"
T0 = 1_700_000_000_000
HALF_DAY = 43_200_000
WHOLE = b"chunked-" * 300


def _md(seq: int, **kw):
    return pk.message_metadata("prod", seq, T0 + seq * HALF_DAY, **kw)


def _chunk(seq: int, cid: int):
    part = [WHOLE[:800], WHOLE[800:1600], WHOLE[1600:]][cid]
    md = _md(seq, uuid="prod-c", chunk_id=cid, num_chunks_from_msg=3, total_chunk_msg_size=len(WHOLE))
    md.uncompressed_size = len(WHOLE)
    return pk.encode_entry(md, part)


def _cfg():
    return pk.ManagedLedgerConfig(max_entries_per_ledger=3, minimum_rollover_time_ms=0)


def _append(root, step: int) -> None:
    """Step 0: plain, batched (LZ4, keys, properties), the first two chunks of a message, an open
    transaction and messages behind it. Step 1: the last chunk, the commit marker, more messages."""
    store = pk.Store.open(root, sync=False)
    orders = store.managed_ledger(ORDERS, _cfg())
    events = store.managed_ledger(EVENTS, _cfg())
    if step == 0:
        for i in range(4):
            orders.add_entry(pk.encode_entry(_md(i, partition_key=f"k{i}", properties=[("n", str(i))]), b"o%d" % i))
        orders.add_entry(
            pk.encode_batch(_md(4), [b"b0", {"payload": b"b1", "key": "bk"}, b"b2"], compression="LZ4"), num_messages=3
        )
        orders.add_entry(_chunk(5, 0))
        orders.add_entry(_chunk(5, 1))
        for i in range(3):
            events.add_entry(pk.encode_entry(_md(10 + i), b"e%d" % i))
        events.add_entry(pk.encode_entry(_md(13, txnid_most_bits=0, txnid_least_bits=7), b"in-txn"))
        events.add_entry(pk.encode_entry(_md(14), b"behind-the-open-txn"))
    else:
        orders.add_entry(_chunk(5, 2))
        orders.add_entry(pk.encode_batch(_md(6), [b"late0", b"late1"], compression="ZSTD"), num_messages=2)
        events.add_entry(pk.encode_entry(_md(15, txnid_most_bits=0, txnid_least_bits=7, marker_type=21), b""))
        events.add_entry(pk.encode_entry(_md(16), b"e-after"))
    store.close()


def _key(r):
    return (r["topic"], r["ledger_id"], r["entry_id"], r["batch_index"])


def _single(root):
    with open_data_dir(root) as dd:
        return list(read_message_rows(dd))


def _iceberg_table(out):
    """The export's table, through its own catalog (the module doc's way of reading it)."""
    from pyiceberg.catalog.sql import SqlCatalog

    catalog = SqlCatalog("pulsarkit", uri=f"sqlite:///{out}/{px.ICEBERG_CATALOG}", warehouse=str(out))
    try:
        return catalog.load_table("pulsarkit.messages")
    finally:
        catalog.engine.dispose()


def _exported(out, to="parquet", snapshot_id=None):
    if to == "delta":
        from deltalake import DeltaTable

        rows = DeltaTable(str(out)).to_pyarrow_table().to_pylist()
    elif to == "iceberg":
        rows = _iceberg_table(out).scan(snapshot_id=snapshot_id).to_arrow().to_pylist()
    else:
        rows = ds.dataset(str(out), format="parquet", partitioning="hive").to_table().to_pylist()
    for r in rows:
        r["properties"] = sorted(r["properties"] or [])
    return sorted(rows, key=_key)


def _norm(rows):
    out = []
    for r in rows:
        r = {k: v for k, v in r.items() if k != "date"}
        r["properties"] = sorted(tuple(kv) for kv in r["properties"] or [])
        out.append(r)
    return sorted(out, key=_key)


def _run(argv, capsys):
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_incremental_parquet_exports_only_new_messages(tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    first_want = _single(root)
    code, stdout, err = _run(["export", str(root), "--to", "parquet", str(out), "--json", "--progress"], capsys)
    assert code == 0 and "partition(s)" in err and "exporting" in err
    first = json.loads(stdout)
    assert first["rows"] == len(first_want) == _norm(_exported(out)).__len__()
    assert _norm(_exported(out)) == _norm(first_want)
    # the open transaction hides its message and everything after it; the chunked message is incomplete
    assert not any(r["payload"] in (b"in-txn", b"behind-the-open-txn", WHOLE) for r in first_want)
    dates = {r["date"] for r in _exported(out)}
    assert len(dates) > 3  # a message every twelve hours

    code, stdout, _ = _run(["export", str(root), "--to", "parquet", str(out), "--json"], capsys)
    assert code == 0 and json.loads(stdout)["rows"] == 0  # nothing new

    _append(root, 1)
    final = _single(root)
    code, stdout, _ = _run(["export", str(root), "--to", "parquet", str(out), "--json"], capsys)
    second = json.loads(stdout)
    new = {_key(r) for r in final} - {_key(r) for r in first_want}
    assert second["rows"] == len(new) > 0
    got = _exported(out)
    assert len({_key(r) for r in got}) == len(got)  # nothing twice
    assert _norm(got) == _norm(final)  # nothing lost
    payloads = {r["payload"] for r in got}
    assert {WHOLE, b"in-txn", b"behind-the-open-txn", b"late1", b"e-after"} <= payloads
    marks = json.loads((out / px.MARKS_FILE).read_text())
    # two runs committed: the run with nothing new committed nothing (issue 21 item 10)
    assert set(marks["files"]) == set(px.data_files(out)) and len(marks["runs"]) == 2


def test_a_run_that_dies_before_its_marks_leaves_nothing_behind(tmp_path, monkeypatch, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    export_mod.export(str(root), "parquet", str(out), log=lambda m: None)
    _append(root, 1)

    def die(self, doc):
        raise KeyboardInterrupt("killed between the data files and the marks file")

    monkeypatch.setattr(px.ParquetTarget, "write_marks_file", die)
    with pytest.raises(KeyboardInterrupt):
        export_mod.export(str(root), "parquet", str(out), log=lambda m: None)
    assert len(px.data_files(out)) > len(json.loads((out / px.MARKS_FILE).read_text())["files"])
    monkeypatch.undo()
    summary = export_mod.export(str(root), "parquet", str(out), log=lambda m: None)
    assert summary.removed_leftovers
    got = _exported(out)
    assert len({_key(r) for r in got}) == len(got) and _norm(got) == _norm(_single(root))


def test_refuses_a_directory_that_is_not_an_export(tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    out.mkdir()
    (out / "precious.txt").write_text("mine")
    code, _, err = _run(["export", str(root), "--to", "parquet", str(out)], capsys)
    assert code == 1 and "not a pulsarkit export" in err and "--force" in err
    code, _, err = _run(["export", str(root), "--to", "parquet", str(root / "inside")], capsys)
    assert code == 1 and "inside the data directory" in err
    code, _, _ = _run(["export", str(root), "--to", "parquet", str(out), "--force"], capsys)
    assert code == 0 and (out / "precious.txt").read_text() == "mine"
    other = tmp_path / "other"
    os.rename(root, other)
    code, _, err = _run(["export", str(other), "--to", "parquet", str(out)], capsys)
    assert code == 1 and "--other-source" in err


@pytest.mark.parametrize(("first", "then"), [("parquet", "delta"), ("delta", "parquet"), ("iceberg", "delta")])
def test_an_export_of_another_format_is_refused_even_with_force(tmp_path, capsys, first, then):
    # --force once wrote a Delta table into a Parquet export's topic=/date= folders: its readers read both
    for to in {first, then} - {"parquet"}:
        pytest.importorskip({"delta": "deltalake", "iceberg": "pyiceberg"}[to])
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    assert _run(["export", str(root), "--to", first, str(out)], capsys)[0] == 0
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    what = {"parquet": "a pulsarkit parquet export", "delta": "a Delta table", "iceberg": "a pulsarkit iceberg export"}
    for force in ([], ["--force"]):
        code, _, err = _run(["export", str(root), "--to", then, str(out), *force], capsys)
        assert code == 1 and f"{out} is {what[first]}, not a {then} export" in err and "pass --force" not in err
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before


def test_delta_export_is_incremental_with_marks_in_the_commit(tmp_path, capsys):
    pytest.importorskip("deltalake")
    root, out = tmp_path / "data", tmp_path / "delta"
    _append(root, 0)
    code, stdout, _ = _run(["export", str(root), "--to", "delta", str(out), "--json"], capsys)
    assert code == 0 and json.loads(stdout)["rows"] == len(_single(root))
    from deltalake import DeltaTable

    version = DeltaTable(str(out)).version()
    code, stdout, _ = _run(["export", str(root), "--to", "delta", str(out), "--json"], capsys)
    # nothing new: no empty Delta commit (issue 21 item 10)
    assert code == 0 and json.loads(stdout)["rows"] == 0 and DeltaTable(str(out)).version() == version
    _append(root, 1)
    code, stdout, _ = _run(["export", str(root), "--to", "delta", str(out), "--json"], capsys)
    got = _exported(out, "delta")
    assert len({_key(r) for r in got}) == len(got) and _norm(got) == _norm(_single(root))
    (last,) = DeltaTable(str(out)).history(1)
    assert json.loads(last[px.DELTA_MARKS_KEY])["marks"]


@pytest.mark.spark
def test_local_and_spark_engines_give_the_same_export(tmp_path, spark, capsys):
    root = tmp_path / "data"
    _append(root, 0)
    outs = {e: tmp_path / e for e in export_mod.ENGINES}
    for step in (0, 1):
        if step:
            _append(root, 1)
        for engine, out in outs.items():
            s = export_mod.export(str(root), "parquet", str(out), engine=engine, spark=spark, log=lambda m: None)
            assert s.rows > 0, engine
    want = _norm(_single(root))
    for engine, out in outs.items():
        assert _exported(out) == _exported(outs["local"]) and _norm(_exported(out)) == want, engine

    def layout(p):
        return sorted(os.path.relpath(d, p) for d, _, files in os.walk(p) if any(f.endswith(".parquet") for f in files))

    assert layout(outs["local"]) == layout(outs["spark"]) == layout(outs["spark-sql"]) and layout(outs["local"])


def test_a_topic_at_a_time_keeps_each_topics_marks(tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    code, stdout, _ = _run(["export", str(root), "--to", "parquet", str(out), "--topic", "orders", "--json"], capsys)
    orders = [r for r in _single(root) if r["topic"].endswith("/orders")]
    assert code == 0 and json.loads(stdout)["rows"] == len(orders) > 0
    code, stdout, _ = _run(["export", str(root), "--to", "parquet", str(out), "--json"], capsys)
    assert json.loads(stdout)["rows"] == len(_single(root)) - len(orders)
    assert _norm(_exported(out)) == _norm(_single(root))
    code, _, err = _run(["export", str(root), "--to", "parquet", str(out), "--topic", "nope"], capsys)
    assert code == 1 and "no topic" in err


def test_a_mark_in_a_ledger_retention_removed_is_reported(tmp_path):
    from pulsarkit.managed_ledger.trim import trim_ledgers

    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    first = export_mod.export(str(root), "parquet", str(out), log=lambda m: None)
    assert first.warnings == []
    _append(root, 1)
    store = pk.Store.open(root, sync=False)
    trim_ledgers(store.managed_ledger(ORDERS, _cfg()), retention_time_ms=0, retention_size_mb=0, now_ms=T0 * 10)
    store.close()
    logged = []
    second = export_mod.export(str(root), "parquet", str(out), log=logged.append)
    (warning,) = second.warnings
    assert "orders" in warning and "trimmed" in warning and any(warning in m for m in logged)


# ----------------------------------------------------------------------------------- Iceberg


def _snapshot_marks(table):
    return json.loads(table.current_snapshot().summary[px.ICEBERG_MARKS_KEY])


def _files_under(out):
    return {
        str(f.relative_to(out))
        for d in ("data", "metadata")
        if (out / d).is_dir()
        for f in (out / d).rglob("*")
        if f.is_file()
    }


def test_iceberg_export_is_incremental_with_marks_in_the_snapshot(tmp_path, capsys):
    pytest.importorskip("pyiceberg")
    from pyiceberg.table import StaticTable

    root, ice, pq_out = tmp_path / "data", tmp_path / "ice", tmp_path / "parquet"
    _append(root, 0)
    first_want = _single(root)
    code, stdout, _ = _run(["export", str(root), "--to", "iceberg", str(ice), "--json"], capsys)
    first = json.loads(stdout)
    assert code == 0 and first["rows"] == len(first_want) > 0
    assert export_mod.export(str(root), "parquet", str(pq_out), log=lambda m: None).rows == first["rows"]
    # the same rows as the Parquet export, date included (a YYYY-MM-DD string in both)
    assert _exported(ice, "iceberg") == _exported(pq_out) and _norm(_exported(ice, "iceberg")) == _norm(first_want)
    table = _iceberg_table(ice)
    first_snapshot = table.current_snapshot().snapshot_id
    parquet_marks = json.loads((pq_out / px.MARKS_FILE).read_text())["marks"]
    assert _snapshot_marks(table)["marks"] == parquet_marks and _snapshot_marks(table)["source"] == str(root)
    # identity partitions on topic and date, data files under data/topic=.../date=...
    assert [f.name for f in table.spec().fields] == ["topic", "date"]
    dirs = {os.path.relpath(f.parent, ice) for f in (ice / "data").rglob("*.parquet")}
    assert dirs and all(d.startswith("data/topic=persistent%3A%2F%2Fpublic%2Fdefault%2F") for d in dirs)
    assert {d.split("/date=")[1] for d in dirs} == {r["date"] for r in _exported(pq_out)}

    code, stdout, _ = _run(["export", str(root), "--to", "iceberg", str(ice), "--json"], capsys)
    # nothing new: no empty snapshot (issue 21 item 10); the summary names the table's current metadata
    assert code == 0 and json.loads(stdout)["rows"] == 0
    assert json.loads(stdout)["metadata"] == first["metadata"] == _iceberg_table(ice).metadata_location

    _append(root, 1)
    final = _single(root)
    code, stdout, _ = _run(["export", str(root), "--to", "iceberg", str(ice), "--json"], capsys)
    second = json.loads(stdout)
    new = {_key(r) for r in final} - {_key(r) for r in first_want}
    assert code == 0 and second["rows"] == len(new) > 0
    table = _iceberg_table(ice)
    added = int(table.current_snapshot().summary["added-records"])
    assert added == len(new)
    # the rows the last snapshot added are exactly the new messages, by id
    before = {_key(r) for r in _exported(ice, "iceberg", snapshot_id=first_snapshot)}
    got = _exported(ice, "iceberg")
    assert before == {_key(r) for r in first_want} and {_key(r) for r in got} - before == new
    assert len({_key(r) for r in got}) == len(got) and _norm(got) == _norm(final)
    export_mod.export(str(root), "parquet", str(pq_out), log=lambda m: None)
    assert _snapshot_marks(table)["marks"] == json.loads((pq_out / px.MARKS_FILE).read_text())["marks"]
    assert len(table.snapshots()) == 2  # the run with nothing new added none
    # any Iceberg reader given the metadata JSON the summary names reads the same table
    assert second["metadata"] == table.metadata_location
    static = StaticTable.from_metadata(second["metadata"]).scan().to_arrow().to_pylist()
    assert _norm(static) == _norm(final)


def test_iceberg_export_refuses_what_is_not_its_own(tmp_path, capsys):
    pytest.importorskip("pyiceberg")
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    out.mkdir()
    (out / "precious.txt").write_text("mine")
    code, _, err = _run(["export", str(root), "--to", "iceberg", str(out)], capsys)
    assert code == 1 and "not a pulsarkit export" in err and "--force" in err
    assert sorted(p.name for p in out.iterdir()) == ["precious.txt"]  # nothing written, not even the catalog
    code, _, _ = _run(["export", str(root), "--to", "iceberg", str(out), "--force"], capsys)
    assert code == 0 and (out / "precious.txt").read_text() == "mine"
    assert _norm(_exported(out, "iceberg")) == _norm(_single(root))
    # a folder that may be someone's table: never written into, --force or not (a run cleans data/, metadata/)
    theirs = tmp_path / "theirs"
    (theirs / "metadata").mkdir(parents=True)
    (theirs / "metadata" / "v1.metadata.json").write_text("{}")
    code, _, err = _run(["export", str(root), "--to", "iceberg", str(theirs), "--force"], capsys)
    assert code == 1 and "data/ or metadata/" in err and (theirs / "metadata" / "v1.metadata.json").exists()
    # another target's export, and an Iceberg export for another target
    pq_out = tmp_path / "pq"
    export_mod.export(str(root), "parquet", str(pq_out), log=lambda m: None)
    code, _, err = _run(["export", str(root), "--to", "iceberg", str(pq_out), "--force"], capsys)
    assert code == 1 and "is a pulsarkit parquet export, not an iceberg export" in err
    code, _, err = _run(["export", str(root), "--to", "parquet", str(out), "--force"], capsys)
    assert code == 1 and "is a pulsarkit iceberg export, not a parquet export" in err
    # marks of another data directory; an export moved away from the paths its metadata names
    other = tmp_path / "other"
    os.rename(root, other)
    code, _, err = _run(["export", str(other), "--to", "iceberg", str(out)], capsys)
    assert code == 1 and "--other-source" in err
    os.rename(other, root)
    os.rename(out, tmp_path / "moved")
    code, _, err = _run(["export", str(root), "--to", "iceberg", str(tmp_path / "moved")], capsys)
    assert code == 1 and "absolute path" in err


@pytest.mark.parametrize("first_run", [True, False])
def test_an_iceberg_run_that_dies_before_its_commit_leaves_the_table_as_it_was(tmp_path, monkeypatch, first_run):
    """The run dies after pyiceberg wrote everything of its append (data files, manifest, manifest list,
    the new metadata JSON) and before the catalog points at it: the commit point."""
    pytest.importorskip("pyiceberg")
    from pyiceberg.catalog.sql import SqlCatalog

    root, out = tmp_path / "data", tmp_path / "ice"
    _append(root, 0)
    if not first_run:
        export_mod.export(str(root), "iceberg", str(out), log=lambda m: None)
        _append(root, 1)
        committed = _exported(out, "iceberg")
        snapshot = _iceberg_table(out).current_snapshot().snapshot_id
    files_before = _files_under(out)
    write_metadata = SqlCatalog._write_metadata

    def die(*args, **kw):
        write_metadata(*args, **kw)
        raise KeyboardInterrupt("killed between the metadata JSON and the catalog's commit")

    monkeypatch.setattr(SqlCatalog, "_write_metadata", staticmethod(die))
    with pytest.raises(KeyboardInterrupt):
        export_mod.export(str(root), "iceberg", str(out), log=lambda m: None)
    monkeypatch.undo()
    leftovers = _files_under(out) - files_before
    assert any(f.endswith(".parquet") for f in leftovers) and any(f.endswith(".metadata.json") for f in leftovers)
    if first_run:
        with pytest.raises(Exception, match="messages"):  # no table: nothing visible
            _iceberg_table(out)
    else:
        assert _iceberg_table(out).current_snapshot().snapshot_id == snapshot
        assert _exported(out, "iceberg") == committed

    logged = []
    summary = export_mod.export(str(root), "iceberg", str(out), log=logged.append)
    assert sorted(summary.removed_leftovers) == sorted(leftovers) and any("did not commit" in m for m in logged)
    assert not leftovers & _files_under(out)  # every one of them gone, the new run's own files in place
    assert not [d for d, dirs, files in os.walk(out / "data") if not dirs and not files]  # no empty folders
    got = _exported(out, "iceberg")
    assert len({_key(r) for r in got}) == len(got) and _norm(got) == _norm(_single(root))


def test_iceberg_export_keeps_each_topics_marks(tmp_path, capsys):
    pytest.importorskip("pyiceberg")
    root, out = tmp_path / "data", tmp_path / "ice"
    _append(root, 0)
    code, stdout, _ = _run(["export", str(root), "--to", "iceberg", str(out), "--topic", "orders", "--json"], capsys)
    orders = [r for r in _single(root) if r["topic"].endswith("/orders")]
    assert code == 0 and json.loads(stdout)["rows"] == len(orders) > 0
    assert list(_snapshot_marks(_iceberg_table(out))["marks"]) == ["persistent://public/default/orders"]
    code, stdout, _ = _run(["export", str(root), "--to", "iceberg", str(out), "--json"], capsys)
    assert json.loads(stdout)["rows"] == len(_single(root)) - len(orders)
    assert _norm(_exported(out, "iceberg")) == _norm(_single(root))


@pytest.mark.spark
def test_local_and_spark_engines_give_the_same_iceberg_export(tmp_path, spark):
    pytest.importorskip("pyiceberg")
    root = tmp_path / "data"
    _append(root, 0)
    outs = {e: tmp_path / e for e in export_mod.ENGINES}
    for step in (0, 1):
        if step:
            _append(root, 1)
        for engine, out in outs.items():
            s = export_mod.export(str(root), "iceberg", str(out), engine=engine, spark=spark, log=lambda m: None)
            assert s.rows > 0, engine
    want = _norm(_single(root))
    for engine, out in outs.items():
        assert (
            _exported(out, "iceberg") == _exported(outs["local"], "iceberg")
            and _norm(_exported(out, "iceberg")) == want
        )

    def layout(p):
        return sorted(os.path.relpath(d, p) for d, _, files in os.walk(p) if any(f.endswith(".parquet") for f in files))

    assert layout(outs["local"]) == layout(outs["spark"]) == layout(outs["spark-sql"]) and layout(outs["local"])


def test_auto_engine_runs_locally_below_the_threshold_and_on_spark_above(tmp_path, capsys, monkeypatch):
    assert export_mod.choose_engine("auto", None, 10, threshold=100, cores=8) == "local"
    assert export_mod.choose_engine("auto", None, 101, threshold=100, cores=8) == "spark"
    # on fewer cores Spark local[n] measured slower than the one process: auto stays local without a master
    assert export_mod.choose_engine("auto", None, 101, threshold=100, cores=2) == "local"
    assert export_mod.choose_engine("auto", "spark://h:7077", 0, threshold=100, cores=2) == "spark"
    assert export_mod.choose_engine("auto", "spark://h:7077", 0, threshold=100) == "spark"
    assert export_mod.choose_engine("spark-sql", None, 0) == "spark-sql"
    # without pyspark: local below and above the threshold; a named master is an error
    monkeypatch.setitem(__import__("sys").modules, "pyspark", None)
    assert export_mod.choose_engine("auto", None, 101, threshold=100, cores=8) == "local"
    with pytest.raises(pk.PulsarkitError, match="needs pyspark"):
        export_mod.choose_engine("auto", "spark://h:7077", 0)
    monkeypatch.undo()
    root, out = tmp_path / "data", tmp_path / "out"
    _append(root, 0)
    code, stdout, err = _run(["export", str(root), "--to", "parquet", str(out), "--json"], capsys)
    assert code == 0 and json.loads(stdout)["engine"] == "local" and "engine local" in err


def test_auto_engine_takes_a_given_session_and_survives_a_spark_that_cannot_start(tmp_path, monkeypatch):
    root = tmp_path / "data"
    _append(root, 0)
    monkeypatch.setattr(export_mod, "SPARK_THRESHOLD", 0)
    monkeypatch.setattr(export_mod, "SPARK_MIN_CORES", 1)  # auto picks Spark on this machine too

    def broken(master):
        raise RuntimeError("Java gateway process exited before sending its port number")

    monkeypatch.setattr(export_mod, "spark_session", broken)
    logged: list[str] = []
    s = export_mod.export(str(root), "parquet", str(tmp_path / "out"), spark_threshold=0, log=logged.append)
    assert s.engine == "local" and s.rows > 0
    assert any("Spark did not start" in m and "exporting in this process" in m for m in logged)


@pytest.mark.parametrize("engine", ["spark", "spark-sql"])
def test_a_spark_engine_without_pyspark_is_one_line_and_touches_nothing(tmp_path, engine):
    """Issue 21 item 6: a ModuleNotFoundError traceback, and a lock file left in OUT."""
    root = tmp_path / "data"
    _append(root, 0)
    out = tmp_path / "out"
    code = (
        "import sys\n"
        "sys.modules['pyspark'] = None  # as where pyspark is not installed\n"
        "from pulsarkit.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "export", str(root), "--to", "parquet", str(out), "--engine", engine],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"pulsarkit export: error: --engine {engine} needs pyspark (pip install 'pulsarkit[spark]'); or --engine local"
    ]
    assert not out.exists()


def test_a_nul_in_a_topic_name_is_escaped_in_its_partition_directory(tmp_path, capsys):
    """Issue 21 item 6: ``ValueError: embedded null byte`` and nothing exported. Spark's escaping leaves
    NUL as it is; the export writes it as %00, which reads back as the topic's own name."""
    root = tmp_path / "data"
    with pk.Store.open(root, sync=False) as store:
        for name in ("public/default/persistent/a\x00b", "public/default/persistent/ok"):
            store.managed_ledger(name, _cfg()).add_entry(pk.encode_entry(_md(0), b"v"))
    out = tmp_path / "out"
    assert main(["export", str(root), "--to", "parquet", str(out), "--engine", "local"]) == 0
    assert (out / "topic=persistent%3A%2F%2Fpublic%2Fdefault%2Fa%00b").is_dir()
    t = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert sorted(t.column("topic").to_pylist()) == [
        "persistent://public/default/a\x00b",
        "persistent://public/default/ok",
    ]
