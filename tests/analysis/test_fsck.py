"""``pulsarkit fsck``: a clean store has no finding worth showing; a flipped byte is a digest error at its
record's offset; a missing entry log leaves index entries pointing at nothing."""

from __future__ import annotations

import json
import os

import pulsarkit as pk
from datadir_fixtures import build_synthetic
from pulsarkit.analysis.fsck import fsck
from pulsarkit.bookkeeper import scan_entry_logs
from pulsarkit.cli import main
from pulsarkit.scan.datadir import open_data_dir


def build(root, logs=1):
    with pk.Store.open(root, log_size_limit=(64 << 10) if logs > 1 else (1 << 30)) as store:
        ml = store.managed_ledger("public/default/persistent/t")
        for i in range(60):
            ml.add_entry(pk.encode_entry(pk.message_metadata("p", i, 1_700_000_000_000 + i), b"v" * 2000))
            if i % 20 == 19:
                store.flush()
    return root / "bookie" / "current"


def serious(findings):
    return [f for f in findings if f["severity"] != "info"]


def test_clean_store(tmp_path):
    build(tmp_path / "d")
    with open_data_dir(tmp_path / "d") as dd:
        assert serious(list(fsck(dd))) == []


def test_a_flipped_byte_is_a_digest_error_at_its_offset(tmp_path, capsys):
    current = build(tmp_path / "d")
    rec = next(r for b in scan_entry_logs([current]) for r in b.to_pylist() if r["entry_id"] == 7)
    path = current / f"{rec['log_id']:x}.log"
    with open(path, "r+b") as f:
        f.seek(rec["offset"] + 4 + rec["size"] - 1)  # the last payload byte of entry 7
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))
    with open_data_dir(tmp_path / "d") as dd:
        (f,) = serious(list(fsck(dd)))
    assert (f["check"], f["severity"], f["offset"], f["entry_id"]) == ("digest", "error", rec["offset"], 7)
    assert main(["fsck", str(tmp_path / "d"), "--json"]) == 3
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert any(r["check"] == "digest" for r in rows)


def test_a_missing_entry_log_leaves_dangling_locations(tmp_path):
    current = build(tmp_path / "d", logs=3)
    logs = sorted(p for p in current.glob("*.log") if p.stat().st_size)
    assert len(logs) >= 2
    os.remove(logs[0])
    with open_data_dir(tmp_path / "d") as dd:
        found = serious(list(fsck(dd)))
    assert found and {f["check"] for f in found} == {"dangling_location"}
    assert all(f["path"].endswith(logs[0].name) for f in found)


def test_a_damaged_entry_only_the_journal_holds_is_an_error(tmp_path_factory, capsys):
    """Issue 21 item 4: fsck called a store clean whose journal-only entry `messages` reports unreadable."""
    root, facts = build_synthetic(tmp_path_factory)
    lid, eid = facts["journal_ledger"], facts["journal_first"] + 1
    with open_data_dir(root) as dd:
        assert serious(list(fsck(dd))) == []
        rec = dd.journal[lid][eid]
    with open(rec.path, "r+b") as f:
        f.seek(rec.offset + 4 + len(rec.data) - 1)  # the last payload byte of the record
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0xFF]))
    with open_data_dir(root) as dd:
        (f,) = serious(list(fsck(dd)))
    assert (f["check"], f["severity"], f["path"], f["offset"]) == ("journal_digest", "error", rec.path, rec.offset)
    assert (f["ledger_id"], f["entry_id"]) == (lid, eid)
    assert main(["fsck", str(root), "--json"]) == 3


def test_metadata_claiming_what_no_bookie_holds(synthetic, tmp_path, capsys):
    """Issue 21 item 4: a topic's ledger whose entries are on no given bookie, one whose metadata claims
    4·10^9 entries (one finding with the count, in bounded time), and a listed ledger without metadata
    are errors, as messages reports them; the clean directory has none."""
    import shutil

    from datadir_fixtures import ORDERS, forge_last_entry

    root, _ = synthetic
    with open_data_dir(root) as dd:
        first, second = dd.ml_ledgers(ORDERS)[:2]
        assert not [f for f in fsck(dd) if "missing" in f["check"]]
    no_data = tmp_path / "no-data"
    shutil.copytree(root, no_data)
    bk = pk.bookkeeper.DbLedgerStorage(no_data / "bookie")
    bk.delete_ledger(first)
    bk.close()
    md = pk.metadata.MetadataStore(no_data / "metadata")
    md.delete_ledger_metadata(second)
    md.close()
    for p in no_data.rglob("LOCK"):
        p.unlink()
    with open_data_dir(no_data) as dd:
        found = {f["check"]: f for f in fsck(dd) if "missing" in f["check"]}
    assert found["ledger_data_missing"]["ledger_id"] == first and found["ledger_data_missing"]["severity"] == "error"
    assert found["missing_ledger"]["ledger_id"] == second
    assert main(["fsck", str(no_data), "--json"]) == 3
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {"ledger_data_missing", "missing_ledger"} <= {r["check"] for r in rows}

    held = forge_last_entry(root, tmp_path / "forged", {"orders": ORDERS}, 4_000_000_000)
    lid, last = held["orders"]
    with open_data_dir(tmp_path / "forged") as dd:
        (f,) = [f for f in fsck(dd) if "missing" in f["check"]]
    assert (f["check"], f["ledger_id"], f["severity"]) == ("ledger_entries_missing", lid, "error")
    assert f"{4_000_000_000 - last} missing" in f["message"]


def test_a_real_standalone_whose_bookie_lost_a_topic_ledger(tmp_path):
    """The datadir oracle's real Pulsar 4.0.7 data (when cached), one topic ledger deleted from its
    bookie: fsck names it as messages does."""
    import shutil
    from pathlib import Path

    import pytest

    stores = sorted((Path.home() / ".cache" / "pulsarkit-tests" / "datadir-oracle").glob("*/clean/data"))
    if not stores:
        pytest.skip("the datadir oracle (tests/interop/standalone) has not run on this machine")
    copy = tmp_path / "data"
    shutil.copytree(stores[0], copy)
    with open_data_dir(copy) as dd:
        assert not [f for f in fsck(dd) if "missing" in f["check"]]
        lid = dd.ml_ledgers(dd.resolve("persistent://public/default/codec-zstd"))[0]
    bk = pk.bookkeeper.DbLedgerStorage(copy / "bookkeeper")
    bk.delete_ledger(lid)
    bk.close()
    for p in copy.rglob("LOCK"):
        p.unlink()
    with open_data_dir(copy) as dd:
        (f,) = [f for f in fsck(dd) if "missing" in f["check"]]
        assert any(i.kind == "ledger_data_missing" and i.ledger_id == lid for i in dd.issues)
    assert (f["check"], f["ledger_id"], f["severity"]) == ("ledger_data_missing", lid, "error")
    assert main(["fsck", str(copy)]) == 3
