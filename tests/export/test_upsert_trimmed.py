"""``export --mode upsert`` of a topic compacted and then trimmed by retention: the retained messages whose ledger is
gone are read from the compacted ledger (with their original message ids), so the table equals what a
``readCompacted`` reader gets (``pulsarkit compacted``), for every target, on a first run and on reruns; a topic
trimmed up to a ledger with no entry still moves its mark to its compacted view; a compacted ledger that cannot give
those rows is an error, never a key silently left out."""

from __future__ import annotations

import base64

import pulsarkit as pk
import pytest
from helpers import read_export
from pulsarkit import export as px
from pulsarkit.analysis import compaction
from pulsarkit.analysis.compaction import compacted_messages, compacted_rows
from pulsarkit.broker.compaction import CompactedTopic, Compactor
from pulsarkit.export.marks import Mark
from pulsarkit.managed_ledger import trim
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.records import DataDirError
from test_upsert import ORDERS, TOPIC, _ml, _table, _write

TARGETS = ["parquet", "delta", "iceberg"]


def _export(root, to, out) -> px.ExportSummary:
    return px.export(str(root), to, str(out), mode="upsert", log=lambda m: None)


def _view(root, up_to: tuple[int, int] | None = None) -> dict[str, tuple]:
    """The oracle: what a ``readCompacted`` reader of the data gets (``pulsarkit compacted``: the compacted
    ledger up to the horizon, then the topic), folded to each key's latest message; an empty or null value
    deletes its key, a message without key is not kept; ``up_to``: only the messages up to that position."""
    out: dict[str, tuple] = {}
    with open_data_dir(root) as dd:
        for r in compacted_messages(dd, TOPIC):
            if up_to is not None and (r["ledger_id"], r["entry_id"]) > up_to:
                break
            payload = base64.b64decode(r["payload_b64"]) if r["payload_b64"] is not None else b""
            if r["key"] is None:
                continue
            if payload:
                out[r["key"]] = (r["ledger_id"], r["entry_id"], r["batch_index"], payload)
            else:
                out.pop(r["key"], None)
    return out


def _add(root, *messages: tuple[int, str, bytes]) -> None:
    with pk.Store.open(root, sync=False) as store:
        ml = _ml(store)
        for seq, key, value in messages:
            ml.add_entry(pk.encode_entry(pk.message_metadata("prod", seq, 1_700_000_000_000 + seq * 1000,
                                                             partition_key=key), value))  # fmt: skip


def _compact_and_trim(root, *after: tuple[int, str, bytes]) -> dict[int, str]:
    """The broker's compaction, ``after`` published, then retention (0: every ledger the compaction consumed)."""
    with pk.Store.open(root, sync=False) as store:
        ml = _ml(store)
        Compactor(store, ml).compact()
    _add(root, *after)
    with pk.Store.open(root, sync=False) as store:
        return trim.trim_ledgers(_ml(store), retention_time_ms=0, retention_size_mb=0).reasons


def _in_trimmed(root, table: dict[str, tuple]) -> set[str]:
    """The keys whose row is at a position of a ledger the topic no longer has."""
    with open_data_dir(root) as dd:
        have = set(dd.ml_ledgers(ORDERS))
    return {k for k, (lid, *_) in table.items() if lid not in have}


def _no_missing(s: px.ExportSummary) -> None:
    assert not [w for w in s.warnings if "not read" in w], s.warnings


@pytest.mark.parametrize("to", TARGETS)
def test_the_rows_only_the_compacted_ledger_holds_are_in_the_table(tmp_path, to):
    """Compacted, two more messages, then retention trimmed the ledgers the compaction covers: a first run, a rerun
    with nothing new, and a rerun after an update, a new key and a tombstone all equal the compacted view."""
    pytest.importorskip({"parquet": "pyarrow", "delta": "deltalake", "iceberg": "pyiceberg"}[to])
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    _write(root, 1)
    trimmed = _compact_and_trim(root, (10, "k0", b"k0-new"), (11, "k6", b"six"))
    assert trimmed
    first = _export(root, to, out)
    _no_missing(first)
    table = _table(to, out)
    assert table == _view(root)
    assert {"k1", "k4", "k5"} <= _in_trimmed(root, table)  # read from the compacted ledger, at their own ids
    assert table["k1"][3] == b"k1-new" and table["k0"][3] == b"k0-new" and "k2" not in table

    again = _export(root, to, out)
    assert again.rows == 0 and again.warnings == [] and _table(to, out) == table

    _add(root, (12, "k4", b"four"), (13, "k6", b""), (14, "k7", b"seven"))
    third = _export(root, to, out)
    _no_missing(third)
    if to != "parquet":  # its mark is in a ledger still there: continued, only what changed written
        assert third.warnings == [] and third.rows == 2
    after = _table(to, out)
    assert after == _view(root)
    changed = {k for k in set(table) | set(after) if table.get(k) != after.get(k)}
    assert changed == {"k4", "k6", "k7"}


@pytest.mark.parametrize("to", TARGETS)
def test_a_topic_trimmed_up_to_an_empty_ledger_still_moves_to_its_compacted_view(tmp_path, to):
    """Everything the compaction covers trimmed, the topic left with its empty current ledger: the run's read of
    the topic finds no entry, so its mark alone would not move; it moves to just before that ledger, where the
    compacted view is the state, on a first run and on a rerun from a mark the trim made stale."""
    pytest.importorskip({"parquet": "pyarrow", "delta": "deltalake", "iceberg": "pyiceberg"}[to])
    root, out, fresh = tmp_path / "data", tmp_path / "out", tmp_path / "fresh"
    _write(root, 0)
    before = _export(root, to, out).topics[TOPIC].until
    stale = _table(to, out)
    _write(root, 1)  # k1 updated, k5 new, k2 deleted
    _compact_and_trim(root)
    with open_data_dir(root) as dd:
        ledgers, end = dd.ml_ledgers(ORDERS), dd.ml_last_position(ORDERS)
        horizon = Mark(*dd.topic(TOPIC).compaction_horizon)
    assert len(ledgers) == 1 and end.entry_id == -1 and before.ledger_id not in ledgers

    second = _export(root, to, out)
    _no_missing(second)
    # Parquet replaces the snapshot every run; Delta and Iceberg say why they do not continue from the mark
    assert [w for w in second.warnings if "read from the start" in w] or to == "parquet", second.warnings
    assert not [w for w in second.warnings if "were not exported" in w]  # no gap: the compacted view holds it
    assert second.topics[TOPIC].until == horizon
    table = _table(to, out)
    assert table == _view(root) != stale
    assert "k2" not in table and table["k5"][3] == b"five" and table["k1"][3] == b"k1-new"

    first = _export(root, to, fresh)
    _no_missing(first)
    assert first.topics[TOPIC].until == horizon and _table(to, fresh) == table

    # nothing new: the mark stays, nothing is written; then new messages continue from it (Delta, Iceberg)
    for o in (out, fresh):
        s = _export(root, to, o)
        assert s.rows == 0 and s.warnings == [] and TOPIC not in s.topics
    _add(root, (20, "k1", b"k1-newer"), (21, "k0", b""))
    for o in (out, fresh):
        s = _export(root, to, o)
        assert s.warnings == [] and s.topics[TOPIC].after == horizon and _table(to, o) == _view(root)
        assert "k0" not in _table(to, o) and _table(to, o)["k1"][3] == b"k1-newer"


@pytest.mark.parametrize("to", TARGETS)
def test_decoded_rows_read_from_the_compacted_ledger(tmp_path, to):
    """``--decode schema``: the rows from the compacted ledger are decoded as the topic's own are (a topic without
    schema: its value the payload's bytes), in every target."""
    pytest.importorskip({"parquet": "pyarrow", "delta": "deltalake", "iceberg": "pyiceberg"}[to])
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    _write(root, 1)
    _compact_and_trim(root, (10, "k0", b"k0-new"))
    s = px.export(str(root), to, str(out), mode="upsert", decode="schema", log=lambda m: None)
    _no_missing(s)
    rows = read_export(to, out).to_pylist()
    got = {r["key"]: (r["ledger_id"], r["entry_id"], r["batch_index"], r["value"]) for r in rows}
    assert len(got) == len(rows) and got == _view(root)
    assert {"k1", "k4", "k5"} <= _in_trimmed(root, got)
    assert all(r["decode_error"] is None for r in rows)


def test_a_compacted_ledger_that_cannot_give_the_rows_is_an_error(tmp_path, monkeypatch):
    """A retained message the compacted ledger does not hold, or a compacted ledger gone from the data, fails the
    read (and so the run) naming the topic: a key is never silently left out."""
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    _write(root, 1)
    _compact_and_trim(root)
    with open_data_dir(root) as dd:
        with pytest.raises(DataDirError, match="not in its compacted ledger"):
            compacted_rows(dd, TOPIC, [(0, 999, -1)])
        assert compacted_rows(dd, TOPIC, []).num_rows == 0
    view = compaction.compacted_topic

    def without_ledger(dd, topic):  # the compacted ledger's metadata gone: a view of the topic alone
        v = view(dd, topic)
        return CompactedTopic(v.ml, None, None, None)

    monkeypatch.setattr(compaction, "compacted_topic", without_ledger)
    with open_data_dir(root) as dd:
        with pytest.raises(DataDirError, match="is not in the data"):
            compacted_rows(dd, TOPIC, [(0, 0, -1)])
    monkeypatch.undo()

    def unreadable(self, first=0):
        raise DataDirError("ledger gone from every bookie")
        yield

    monkeypatch.setattr(CompactedTopic, "compacted_entries", unreadable)
    with pytest.raises(DataDirError, match="compacted .* does not read: ledger gone from every bookie"):
        _export(root, "parquet", out)


@pytest.mark.spark
@pytest.mark.parametrize("to", ["parquet", "delta"])
def test_the_spark_engine_writes_the_compacted_ledgers_rows_too(tmp_path, spark, to):
    """``--engine spark``: the tasks read the topic's ledgers, the run stages the compacted ledger's rows; the
    table is the local engine's, and the compacted view."""
    pytest.importorskip({"parquet": "pyarrow", "delta": "deltalake"}[to])
    from pulsarkit.spark import export as spark_export

    root = tmp_path / "data"
    _write(root, 0)
    _write(root, 1)
    _compact_and_trim(root, (10, "k0", b"k0-new"), (11, "k6", b"six"))
    tables = {}
    for engine in ("local", "spark"):
        out = tmp_path / f"out-{engine}"
        s = spark_export.export(str(root), to, str(out), engine=engine, spark=spark, mode="upsert", log=lambda m: None)
        _no_missing(s)
        tables[engine] = _table(to, out)
    assert tables["spark"] == tables["local"] == _view(root)


def test_a_run_up_to_before_a_trimmed_horizon_says_what_it_misses(tmp_path):
    """``--until`` before the compaction horizon: the state there is the topic's own entries, some trimmed: the run
    says so (a run to the horizon has them); a run to the horizon or later is the compacted view, no warning."""
    root = tmp_path / "data"
    with pk.Store.open(root, sync=False) as store:  # one session: the horizon's ledger stays the current one
        ml = _ml(store)
        for i in range(5):  # three entries in the first ledger, two in the second
            ml.add_entry(pk.encode_entry(pk.message_metadata("prod", i, 1_700_000_000_000 + i, partition_key=f"k{i}"),
                                         b"v%d" % i))  # fmt: skip
        Compactor(store, ml).compact()
        ml.add_entry(pk.encode_entry(pk.message_metadata("prod", 5, 1_700_000_000_005, partition_key="k0"), b"new"))
        assert trim.trim_ledgers(ml, retention_time_ms=0, retention_size_mb=0).reasons
    with open_data_dir(root) as dd:
        first, horizon = dd.ml_ledgers(ORDERS)[0], dd.topic(TOPIC).compaction_horizon
    assert (first, 0) < tuple(horizon)
    early = px.export(str(root), "parquet", str(tmp_path / "early"), mode="upsert", log=lambda m: None,
                      until={TOPIC: px.MessageId(first, 0)})  # fmt: skip
    assert [w for w in early.warnings if "before the compaction horizon" in w and "retention trimmed" in w]
    s = px.export(str(root), "parquet", str(tmp_path / "at"), mode="upsert", log=lambda m: None,
                  until={TOPIC: px.MessageId(horizon.ledger_id, horizon.entry_id)})  # fmt: skip
    assert s.warnings == [] and _table("parquet", tmp_path / "at") == _view(root, tuple(horizon))
    assert _table("parquet", tmp_path / "at")["k0"][3] == b"v0"
