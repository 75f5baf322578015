"""An upsert rerun to Delta or Iceberg continues each topic from its committed mark: phase one starts from the
table's own rows and reads only the entries after the mark, only the rows after it are staged, and the MERGE or
upsert deletes the keys a tombstone deleted since. The table equals the one a read from the start gives (the
compacted view), also when the broker compacted the topic in between; when the mark cannot be trusted (its
ledger trimmed after a compaction, table rows past it) the topic is read from the start, with a warning."""

from __future__ import annotations

import shutil

import pulsarkit as pk
import pyarrow as pa
import pytest
from pulsarkit import export as px
from pulsarkit.broker.compaction import Compactor
from pulsarkit.export import run as export_run
from pulsarkit.export import upsert
from pulsarkit.export.marks import Mark
from pulsarkit.managed_ledger import trim
from pulsarkit.scan.datadir import DataDir, open_data_dir
from test_upsert import ORDERS, TOPIC, _compacted, _ml, _table, _write
from test_upsert_trimmed import _view

TARGETS = ["delta", "iceberg"]


def _export(root, to, out, topics=None) -> px.ExportSummary:
    return px.export(str(root), to, str(out), mode="upsert", log=lambda m: None, topics=topics)


@pytest.fixture
def reads(monkeypatch) -> list[tuple[str, tuple[int, int]]]:
    """Every entry the run reads: ("phase one", position) for the topic's own entries (``ml_entries``), ("view",
    position) for the compacted view, ("staged", (ledger, entry)) for the rows the staging read."""
    seen: list[tuple[str, tuple[int, int]]] = []
    ml_entries, compacted_topic, read_part = DataDir.ml_entries, upsert.phase_one.__globals__["compacted_topic"], None

    def own(self, ml, start=None):
        for pos, d in ml_entries(self, ml, start):
            seen.append(("phase one", tuple(pos)))
            yield pos, d

    def view(dd, topic):
        ct = compacted_topic(dd, topic)
        seen.append(("view", (-1, -1)))
        return ct

    read_part = export_run.read_part

    def staged(part, on_error, found, *more):
        for b in read_part(part, on_error, found, *more):
            seen.extend(("staged", p) for p in zip(b.column("ledger_id").to_pylist(), b.column("entry_id").to_pylist()))
            yield b

    monkeypatch.setattr(DataDir, "ml_entries", own)
    monkeypatch.setitem(upsert.phase_one.__globals__, "compacted_topic", view)
    monkeypatch.setattr(export_run, "read_part", staged)
    return seen


def _full(root, to, tmp_path) -> dict:
    """The same data exported by one run into a new output: the read from the start."""
    out = tmp_path / f"full-{len(list(tmp_path.glob('full-*')))}"
    _export(root, to, out)
    return _table(to, out)


@pytest.mark.parametrize("topics", [None, ["orders"]])
@pytest.mark.parametrize("to", TARGETS)
def test_a_rerun_reads_only_what_came_after_the_mark_and_equals_a_full_read(tmp_path, to, topics, reads):
    pytest.importorskip({"delta": "deltalake", "iceberg": "pyiceberg"}[to])
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    first = _export(root, to, out)
    mark = first.topics[TOPIC].until
    assert ("view", (-1, -1)) in reads  # a first run reads the topic whole, through its compacted view
    _write(root, 1)  # k1 updated, k5 new, k2 deleted by a null value in a batch, a keyless message
    reads.clear()
    second = _export(root, to, out, topics)
    assert second.warnings == []
    assert reads and all(kind != "view" and pos > tuple(mark) for kind, pos in reads), reads
    assert {pos for kind, pos in reads if kind == "staged"} <= {pos for kind, pos in reads if kind == "phase one"}
    assert second.rows == 2  # k1 and k5: only the keys whose message is new are written
    table = _table(to, out)
    assert table == _full(root, to, tmp_path) == _compacted(root, tmp_path)
    assert "k2" not in table and table["k1"][3] == b"k1-new" and table["k5"][3] == b"five"


@pytest.mark.parametrize("to", TARGETS)
def test_a_compaction_between_runs_changes_nothing(tmp_path, to):
    """The broker's compactor ran on the topic after the first run: the rerun still reads the topic's own
    entries after its mark (the compacted ledger has no tombstones), and equals the compacted view."""
    pytest.importorskip({"delta": "deltalake", "iceberg": "pyiceberg"}[to])
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    _export(root, to, out)
    _write(root, 1)
    with pk.Store.open(root, sync=False) as store:
        Compactor(store, _ml(store)).compact()
    second = _export(root, to, out)
    assert second.warnings == []
    assert _table(to, out) == _compacted(root, tmp_path) == _full(root, to, tmp_path)


@pytest.mark.parametrize("to", TARGETS)
def test_a_mark_whose_ledger_was_trimmed_is_read_from_the_start(tmp_path, to, reads):
    """Compacted, more messages, then retention trimmed the ledgers the compaction covers (the mark's among
    them, and the tombstone's: the compacted ledger has dropped it), so reading on from the mark would keep
    the deleted key: the run says why and reads the topic from its start, as a new export does (the rows only the
    compacted ledger still holds read from it: both equal the compacted view, no key missing)."""
    pytest.importorskip({"delta": "deltalake", "iceberg": "pyiceberg"}[to])
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    mark = _export(root, to, out).topics[TOPIC].until
    _write(root, 1)
    with pk.Store.open(root, sync=False) as store:
        ml = _ml(store)
        Compactor(store, ml).compact()
        ml.add_entry(pk.encode_entry(pk.message_metadata("prod", 10, 1_700_000_010_000, partition_key="k0"), b"k0-new"))
        ml.add_entry(pk.encode_entry(pk.message_metadata("prod", 11, 1_700_000_011_000, partition_key="k6"), b"six"))
        trimmed = trim.trim_ledgers(ml, retention_time_ms=0, retention_size_mb=0)
    assert mark.ledger_id in trimmed.reasons
    reads.clear()
    second = _export(root, to, out)
    assert [w for w in second.warnings if "read from the start" in w and "trimmed since" in w], second.warnings
    assert ("view", (-1, -1)) in reads
    fresh = tmp_path / "fresh"
    again = _export(root, to, fresh)
    table = _table(to, out)
    assert table == _table(to, fresh) and "k2" not in table
    assert table["k0"][3] == b"k0-new" and table["k6"][3] == b"six"
    assert table == _view(root)
    assert not [w for w in [*second.warnings, *again.warnings] if "not read" in w or "not exported" in w]


def test_why_a_mark_is_not_continued(tmp_path):
    root = tmp_path / "data"
    _write(root, 0)
    state = pa.table(
        {"key": ["k0"], "ledger_id": pa.array([0], pa.int64()), "entry_id": pa.array([0], pa.int64())}
    ).append_column("batch_index", pa.array([-1], pa.int32()))
    with open_data_dir(root) as dd:
        end = dd.ml_last_position(ORDERS)
        first = dd.ml_ledgers(ORDERS)[0]
        ok, why = upsert.continued(dd, {TOPIC: Mark(*end)}, {TOPIC: state})
        assert set(ok) == {TOPIC} and why == []
        cases = {
            "could not be read": ({TOPIC: Mark(*end)}, {}),
            "gone from the topic": ({TOPIC: Mark(first + 1000, 0)}, {TOPIC: state}),
            "past the topic's end": ({TOPIC: Mark(end.ledger_id, end.entry_id + 1)}, {TOPIC: state}),
            "rows after it": ({TOPIC: Mark(first, -1)}, {TOPIC: state}),
        }
        for reason, (before, states) in cases.items():
            ok, why = upsert.continued(dd, before, states)
            assert ok == {} and len(why) == 1 and reason in why[0], (reason, why)
        # a topic gone from the data is left to the run's gap warnings
        assert upsert.continued(dd, {"persistent://public/default/gone": Mark(*end)}, {}) == ({}, [])


def test_parquet_reads_the_topic_whole_each_run(tmp_path, reads):
    """A Parquet snapshot is rewritten whole, so its topic is read whole (no warning: nothing is wrong)."""
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    _export(root, "parquet", out)
    _write(root, 1)
    reads.clear()
    second = _export(root, "parquet", out)
    assert second.warnings == [] and ("view", (-1, -1)) in reads
    assert _table("parquet", out) == _compacted(root, tmp_path)
    shutil.rmtree(out)
