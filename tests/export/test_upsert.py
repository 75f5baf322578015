"""``export --mode upsert``: a keyed topic as its latest message per key, equal to the compacted view
after pulsarkit's compactor ran on a copy of the same data at the same position; a rerun after new
messages and a tombstone changes exactly those keys (Parquet snapshot, Delta MERGE)."""

from __future__ import annotations

import base64
import json
import shutil

import pulsarkit as pk
import pytest
from helpers import read_export
from pulsarkit import export as px
from pulsarkit.analysis.compaction import compacted_messages
from pulsarkit.analysis.messages import read_message_rows
from pulsarkit.broker.compaction import Compactor
from pulsarkit.cli import main
from pulsarkit.scan.datadir import open_data_dir

ORDERS = "public/default/persistent/orders"
TOPIC = "persistent://public/default/orders"
T0 = 1_700_000_000_000


def _md(seq: int, **kw):
    return pk.message_metadata("prod", seq, T0 + seq * 1000, **kw)


def _ml(store):
    return store.managed_ledger(ORDERS, pk.ManagedLedgerConfig(max_entries_per_ledger=3, minimum_rollover_time_ms=0))


def _write(root, step: int) -> None:
    """Step 0: keys k0..k4 (k1 twice, one in a batch), a keyless message, k3 deleted by an empty value.
    Step 1: k1 updated, k5 new, k2 deleted by a null value (in a batch), another keyless message."""
    with pk.Store.open(root, sync=False) as store:
        ml = _ml(store)
        if step == 0:
            for i in range(5):
                ml.add_entry(pk.encode_entry(_md(i, partition_key=f"k{i}"), b"v%d" % i))
            batch = [{"payload": b"k1-again", "key": "k1"}, {"payload": b"x", "key": "k4"}, {"payload": b"nokey"}]
            ml.add_entry(pk.encode_batch(_md(5), batch), num_messages=3)
            ml.add_entry(pk.encode_entry(_md(6, partition_key="k3"), b""))
        else:
            ml.add_entry(pk.encode_entry(_md(7, partition_key="k1"), b"k1-new"))
            batch = [{"payload": b"", "key": "k2", "null_value": True}, {"payload": b"five", "key": "k5"}]
            ml.add_entry(pk.encode_batch(_md(8), batch), num_messages=2)
            ml.add_entry(pk.encode_entry(_md(9), b"nokey-again"))


def _compacted(root, tmp_path) -> dict[str, tuple]:
    """The oracle: pulsarkit's compactor on a copy, then what a readCompacted reader gets."""
    copy = tmp_path / f"compacted-{len(list(tmp_path.iterdir()))}"
    shutil.copytree(root, copy)
    with pk.Store.open(copy, sync=False) as store:
        Compactor(store, _ml(store)).compact()
    with open_data_dir(copy) as dd:
        rows = list(compacted_messages(dd, TOPIC))
    assert all(r["from_compacted_ledger"] for r in rows)
    return {
        r["key"]: (r["ledger_id"], r["entry_id"], r["batch_index"], base64.b64decode(r["payload_b64"])) for r in rows
    }


def _table(to: str, out) -> dict[str, tuple]:
    rows = read_export(to, out).to_pylist()
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)), "one row per key"
    return {r["key"]: (r["ledger_id"], r["entry_id"], r["batch_index"], r["payload"]) for r in rows}


def _export(root, to, out, *args) -> dict:
    return px.export(str(root), to, str(out), mode="upsert", log=lambda m: None, **dict(args)).to_json()


@pytest.mark.parametrize("to", ["parquet", "delta", "iceberg"])
def test_upsert_equals_the_compacted_view_and_a_rerun_changes_exactly_those_keys(tmp_path, to):
    pytest.importorskip({"parquet": "pyarrow", "delta": "deltalake", "iceberg": "pyiceberg"}[to])
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    _export(root, to, out)
    first = _table(to, out)
    assert first == _compacted(root, tmp_path)
    assert set(first) == {"k0", "k1", "k2", "k4"}  # k3 deleted by an empty value; the keyless message left out
    assert first["k1"][3] == b"k1-again"

    # nothing new: no commit, the same table
    s = _export(root, to, out)
    assert s["rows"] == 0 and _table(to, out) == first

    _write(root, 1)
    _export(root, to, out)
    second = _table(to, out)
    assert second == _compacted(root, tmp_path)
    changed = {k for k in set(first) | set(second) if first.get(k) != second.get(k)}
    assert changed == {"k1", "k2", "k5"}
    assert "k2" not in second and second["k1"][3] == b"k1-new"
    if to == "parquet":  # the earlier snapshot's files are gone; the marks file lists exactly the files there
        marks = json.loads((out / px.MARKS_FILE).read_text())
        assert marks["mode"] == "upsert" and sorted(marks["files"]) == px.data_files(out)
    elif to == "delta":
        from deltalake import DeltaTable

        assert DeltaTable(str(out)).history(1)[0]["operation"] == "MERGE"


def test_upsert_until_a_position_equals_the_compacted_view_there(tmp_path):
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    at_step0 = _compacted(root, tmp_path)
    with open_data_dir(root) as dd:
        last = dd.ml_last_position(ORDERS)
    _write(root, 1)
    s = _export(root, "parquet", out, ("until", {TOPIC: px.MessageId(last.ledger_id, last.entry_id)}))
    assert _table("parquet", out) == at_step0
    with open_data_dir(root) as dd:
        after = [
            (r["ledger_id"], r["entry_id"]) for r in read_message_rows(dd) if (r["ledger_id"], r["entry_id"]) > last
        ]
    assert s["topics"][TOPIC]["next"] == "%d:%d:-1" % after[0]  # the hand-off: the first message after the position


def test_upsert_through_the_cli_and_its_refusals(tmp_path, capsys):
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    assert main(["export", str(root), "--to", "parquet", str(out), "--mode", "upsert", "--engine", "local"]) == 0
    assert set(_table("parquet", out)) == {"k0", "k1", "k2", "k4"}
    capsys.readouterr()
    # an upsert export is not continued as an append one, nor the other way round
    assert main(["export", str(root), "--to", "parquet", str(out), "--engine", "local"]) == 1
    assert "mode upsert, not append" in capsys.readouterr().err
    appended = tmp_path / "appended"
    assert main(["export", str(root), "--to", "parquet", str(appended), "--engine", "local"]) == 0
    capsys.readouterr()
    assert main(["export", str(root), "--to", "parquet", str(appended), "--mode", "upsert"]) == 1
    assert "mode append, not upsert" in capsys.readouterr().err
    with open_data_dir(root) as dd:
        (cut,) = [f"{r['ledger_id']}:{r['entry_id']}:-1:0" for r in read_message_rows(dd) if r["batch_index"] == 2]
    assert main(["export", str(root), "--to", "parquet", str(tmp_path / "u"), "--mode", "upsert", "--until", cut]) == 1
    assert "--mode upsert takes --until LEDGER:ENTRY without a batch index" in capsys.readouterr().err


def test_a_run_that_dies_after_its_commit_point_leaves_the_old_snapshot_to_the_next_run(tmp_path, monkeypatch):
    """The Parquet snapshot switches at the marks file's rename; the replaced files are deleted after it. A run
    killed in between leaves them (a reader of the marks file's list already sees the new snapshot alone); the
    next run deletes them, and only them."""
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    _export(root, "parquet", out)
    old = set(px.data_files(out))
    _write(root, 1)
    monkeypatch.setattr(px.ParquetTarget, "_drop_replaced", lambda self: None)
    _export(root, "parquet", out)
    listed = set(json.loads((out / px.MARKS_FILE).read_text())["files"])
    assert old <= set(px.data_files(out)) and not old & listed
    monkeypatch.undo()
    assert _export(root, "parquet", out)["rows"] == 0  # nothing new: it only finishes the last run's deletions
    assert set(px.data_files(out)) == listed
    assert _table("parquet", out) == _compacted(root, tmp_path)


def test_an_upsert_rerun_until_an_earlier_position_keeps_the_snapshot(tmp_path):
    root, out = tmp_path / "data", tmp_path / "out"
    _write(root, 0)
    with open_data_dir(root) as dd:
        first = next(iter(read_message_rows(dd)))
    _export(root, "parquet", out)
    snapshot = _table("parquet", out)
    s = _export(root, "parquet", out, ("until", {TOPIC: px.MessageId(first["ledger_id"], first["entry_id"])}))
    assert s["rows"] == 0 and _table("parquet", out) == snapshot
