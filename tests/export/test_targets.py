"""The export as a library: every table format is a :class:`pulsarkit.export.Target` driven through
one protocol (open, recover, marks, begin, write, commit), looked up by its ``--to`` name; the same
small export through each of them with :func:`pulsarkit.export.export` reads back the same rows."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pulsarkit as pk
import pyarrow as pa
import pytest
from helpers import read_export
from pulsarkit import export as px
from pulsarkit.scan import plan, read_partition

ORDERS = "public/default/persistent/orders"
EVENTS = "public/default/persistent/events"
T0 = 1_700_000_000_000
DAY = 86_400_000
#: the optional package each target needs
NEEDS = {"parquet": None, "delta": "deltalake", "iceberg": "pyiceberg"}


def _append(root: Path, step: int) -> set[bytes]:
    """Messages over two topics and two days (a batch among them); returns their payloads."""
    payloads = set()
    with pk.Store.open(root, sync=False) as store:
        for name in (ORDERS, EVENTS):
            ml = store.managed_ledger(name, pk.ManagedLedgerConfig(max_entries_per_ledger=2))
            for i in range(3):
                seq = step * 10 + i
                p = f"{name[-6:]}-{seq}".encode()
                ml.add_entry(pk.encode_entry(pk.message_metadata("prod", seq, T0 + seq * DAY // 2), p))
                payloads.add(p)
            md = pk.message_metadata("prod", step * 10 + 5, T0 + step * DAY)
            batch = [f"{name[-6:]}-b{step}-{j}".encode() for j in range(2)]
            ml.add_entry(pk.encode_batch(md, batch), num_messages=2)
            payloads.update(batch)
    return payloads


def _needs(to: str) -> None:
    if NEEDS[to]:
        pytest.importorskip(NEEDS[to])


def _read_back(to: str, out: Path) -> pa.Table:
    """The export as a reader of the format sees it, sorted by message id, ``date`` as a string."""
    t = read_export(to, out)
    if to == "parquet":  # hive partitioning reads the date back as a date
        t = t.set_column(t.schema.get_field_index("date"), "date", t.column("date").cast(pa.string()))
    cols = ["topic", "ledger_id", "entry_id", "batch_index", "payload", "publish_time", "date"]
    return t.select(cols).sort_by([(c, "ascending") for c in cols[:4]])


def _batches(root: Path) -> list[pa.RecordBatch]:
    p = plan([str(root)])
    return [b for task in p.tasks() for part in task for b in read_partition(part)]


def test_every_target_is_a_target_registered_under_its_name():
    assert set(px.TARGETS) == {"parquet", "delta", "iceberg"}
    for name, cls in px.TARGETS.items():
        assert issubclass(cls, px.Target) and cls.name == name
        # what the format supplies; the rest of the protocol is the base class's, the same for all
        assert not getattr(cls, "__abstractmethods__", None)
        for method in ("recover", "marks", "begin", "write", "commit"):
            assert getattr(cls, method) is getattr(px.Target, method), (name, method)
    with pytest.raises(TypeError):
        px.Target(Path("/nonexistent"), "/data")  # abstract: _open and _commit are the format's


@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_each_target_begins_writes_commits_and_recovers(tmp_path, to):
    _needs(to)
    root, out = tmp_path / "data", tmp_path / "out"
    payloads = _append(root, 0)
    source = str(root.resolve())
    out.mkdir()
    cls = px.TARGETS[to]

    target = cls(out, source)
    try:
        assert target.recover() == [] and target.marks() == {}
        staging = target.begin("run-1", "test")
        assert staging == out / px.STAGING / "run-1"
        for b in _batches(root):
            target.write(b)
        marks = {"persistent://public/default/orders": px.Mark(3, 1)}
        commit = target.commit(marks)
    finally:
        target.close()
    assert commit.run.run == "run-1" and commit.run.engine == "test"
    assert commit.run.rows == sum(commit.rows.values()) == len(payloads) and commit.staged > 0
    assert (commit.files is not None) == (to == "parquet")  # Parquet names its data files itself
    assert not (out / px.STAGING).exists()
    assert set(_read_back(to, out).column("payload").to_pylist()) == payloads

    # reopened: the committed marks; a run that writes and dies leaves nothing visible
    target = cls(out, source)
    try:
        assert target.marks() == marks
        target.begin("run-2", "test")
        for b in _batches(root):
            target.write(b)
    finally:
        target.close()  # never committed
    assert (out / px.STAGING / "run-2").exists()
    target = cls(out, source)
    try:
        assert target.marks() == marks
        target.recover()
        assert not (out / px.STAGING).exists()
    finally:
        target.close()
    assert set(_read_back(to, out).column("payload").to_pylist()) == payloads

    # marks of another data directory are refused unless asked for
    with pytest.raises(px.ExportRefused, match="--other-source"):
        cls(out, str(tmp_path / "elsewhere"))
    cls(out, str(tmp_path / "elsewhere"), other_source=True).close()


def test_the_same_export_through_every_target_reads_back_the_same(tmp_path):
    root = tmp_path / "data"
    payloads = _append(root, 0)
    got: dict[str, pa.Table] = {}
    for to in px.TARGETS:
        if NEEDS[to]:
            try:
                __import__(NEEDS[to])
            except ImportError:
                continue
        out = tmp_path / to
        first = px.export(str(root), to, str(out), log=lambda m: None)
        assert isinstance(first, px.ExportSummary) and first.to == to and first.engine == "local"
        assert first.rows == len(payloads) and set(first.topics) == {
            "persistent://public/default/orders",
            "persistent://public/default/events",
        }
        assert all(t.after is None and t.rows > 0 for t in first.topics.values())
        json.dumps(first.to_json())  # the --json document
        assert (first.metadata is not None) == (to == "iceberg")
        again = px.export(str(root), to, str(out), log=lambda m: None)
        assert again.rows == 0 and again.topics == {}
        got[to] = _read_back(to, out)
    assert "parquet" in got
    for to, table in got.items():
        assert table.equals(got["parquet"]), to
        assert set(table.column("payload").to_pylist()) == payloads
        assert len(set(table.column("date").to_pylist())) > 1

    # the next run adds exactly the new messages, from after each topic's mark
    more = _append(root, 1)
    for to in got:
        s = px.export(str(root), to, str(tmp_path / to), log=lambda m: None)
        assert s.rows == len(more) and all(t.after is not None and t.until > t.after for t in s.topics.values())
        assert set(_read_back(to, tmp_path / to).column("payload").to_pylist()) == payloads | more


def test_an_unknown_target_and_an_engine_of_ones_own(tmp_path):
    root = tmp_path / "data"
    payloads = _append(root, 0)
    with pytest.raises(pk.PulsarkitError, match="parquet, delta, iceberg"):
        px.export(str(root), "csv", str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()

    seen: list[px.ExportJob] = []

    class Counting(px.LocalEngine):
        name = "counting"

    def choose(job: px.ExportJob) -> px.Engine:
        seen.append(job)
        return Counting()

    progress: list[tuple[int, int]] = []

    class Reporter:
        def __init__(self, total: int) -> None:
            self.total = total

        def update(self, done: int, note: str = "") -> None:
            progress.append((done, self.total))

        def close(self) -> None:
            pass

    s = px.export(str(root), "parquet", str(tmp_path / "out"), engine=choose, progress=Reporter, log=lambda m: None)
    (job,) = seen
    assert s.engine == "counting" and s.rows == len(payloads)
    assert job.after == {} and set(job.until) == set(s.topics) and job.planned_bytes > 0
    assert progress and progress[-1] == (job.planned_bytes, job.planned_bytes)
    runs = json.loads((tmp_path / "out" / px.MARKS_FILE).read_text())["runs"]
    assert [r["engine"] for r in runs] == ["counting"]


@pytest.mark.parametrize(("to", "module"), [("delta", "deltalake"), ("iceberg", "pyiceberg.catalog.sql")])
def test_a_format_whose_package_is_missing_is_refused_naming_the_extra(tmp_path, monkeypatch, to, module):
    """Delta and Iceberg import their optional package only when opened; without it the target is
    refused (nothing written) with the package and the extra to install."""
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    out = tmp_path / "out"
    out.mkdir()
    needs = rf"--to {to} needs the {module.split('.')[0]} package .*pulsarkit\[{to}\]"
    with pytest.raises(px.ExportRefused, match=needs):
        px.TARGETS[to](out, str(tmp_path))
    assert list(out.iterdir()) == []


def test_an_input_that_is_a_file_or_missing_is_named_as_such(tmp_path):
    from pulsarkit.export.protocol import check_output
    from pulsarkit.scan.records import DataDirError

    a_file = tmp_path / "data.tar"
    a_file.write_bytes(b"x")
    with pytest.raises(DataDirError, match=r"data.tar: not a directory$"):
        check_output([str(a_file)], str(tmp_path / "out"), tmp_path / "out")
    with pytest.raises(DataDirError, match=r"gone: no such directory$"):
        check_output([str(tmp_path / "gone")], str(tmp_path / "out"), tmp_path / "out")
