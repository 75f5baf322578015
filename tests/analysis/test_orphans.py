"""Orphan ledgers and disk attribution, on a store where each kind of orphan is made on purpose."""

from __future__ import annotations

import json

import pulsarkit as pk
from pulsarkit.analysis.datadir import open_data_dir
from pulsarkit.analysis.orphans import cleanup_plan, disk_usage_rows, find_orphans
from pulsarkit.broker.compaction import Compactor
from pulsarkit.cli import main
from pulsarkit.managed_ledger.ledger_handle import LedgerHandle

ML = "public/default/persistent/orders"


def ledger(store, custom, entries=2):
    h = LedgerHandle.create(store, {k: v.encode() for k, v in custom.items()}, "CRC32C")
    for i in range(entries):
        h.add_entry(pk.encode_entry(pk.message_metadata("p", i, 1_700_000_000_000 + i), b"x" * 100))
    h.close()
    return h.ledger_id


def build(root):
    made = {}
    with pk.Store.open(root) as store:
        ml = store.managed_ledger(ML)
        for i in range(5):
            ml.add_entry(pk.encode_entry(pk.message_metadata("p", i, 1_700_000_000_000 + i, partition_key="k"), b"v"))
        ml.open_cursor("sub", "earliest")
        Compactor(store, ml).compact()
        base = {"application": "pulsar", "component": "managed-ledger"}
        made["no_owner"] = ledger(store, base | {"pulsar/managed-ledger": ML})
        made["owner_gone"] = ledger(store, base | {"pulsar/managed-ledger": "public/default/persistent/gone"})
        made["deleted_subscription"] = ledger(store, base | {"pulsar/managed-ledger": ML, "pulsar/cursor": "old-sub"})
        made["old_compacted"] = ledger(
            store,
            {
                "application": "pulsar",
                "component": "compacted-ledger",
                "pulsar/compactedTopic": "persistent://public/default/orders",
            },
        )
        made["schema_of_deleted"] = ledger(
            store, {"application": "pulsar", "component": "schema", "pulsar/schemaId": "public/default/dropped"}
        )
        made["on_disk_only"] = ledger(store, base | {"pulsar/managed-ledger": ML})
        store.metadata.delete_ledger_metadata(made["on_disk_only"])
        store.flush()
    return made


def test_finds_exactly_the_orphans_made_and_nothing_live(tmp_path):
    made = build(tmp_path / "d")
    with open_data_dir(tmp_path / "d") as dd:
        found = {f.ledger_id: f for f in find_orphans(dd)}
        assert {f.category: lid for lid, f in found.items()} == made
        assert found[made["no_owner"]].verdict == "review"
        assert (
            found[made["on_disk_only"]].verdict == "safe"
            and "no ledger metadata" in found[made["on_disk_only"]].evidence
        )
        live = {led.ledger_id for led in dd.ledgers.values() if led.referenced}
        assert not live & set(found)  # the topic's ledgers, its cursor and the current compacted ledger are not orphans
        plan = cleanup_plan(dd)
        assert {i["ledger_id"] for i in plan["items"]} == set(made.values()) - {made["no_owner"]}
        assert plan["bytes"] == sum(i["bytes_on_bookie"] for i in plan["items"]) > 0
        rows = list(disk_usage_rows(dd))
        by = {r["ledger_id"]: r for r in rows}
        assert by[made["on_disk_only"]]["live"] is False and by[made["owner_gone"]]["owner_class"] == "orphan"
        assert sum(r["bytes"] for r in rows) == sum(m.remaining_size for _, _, m in dd.entry_logs())


def test_cli_orphans_plan_and_du(tmp_path, capsys):
    build(tmp_path / "d")
    plan = tmp_path / "plan.json"
    assert main(["orphans", str(tmp_path / "d"), "--plan", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "6 orphan ledger(s)" in out and json.loads(plan.read_text())["kind"] == "orphan-ledger-cleanup"
    assert main(["orphans", str(tmp_path / "d"), "--plan", str(plan)]) == 1  # never over a file without --overwrite
    capsys.readouterr()
    assert main(["du", str(tmp_path / "d"), "--by", "owner", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {r["owner_class"] for r in rows} >= {"topic", "compacted", "orphan", "deleted"}
    assert main(["du", str(tmp_path / "d")]) == 0
    assert "live bytes" in capsys.readouterr().out
