"""Orphan ledgers and disk attribution, on a store where each kind of orphan is made on purpose."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pulsarkit as pk
import pytest
from pulsarkit import durable
from pulsarkit.analysis.orphan_cleanup import OrphanCleanupError, execute, restore_backup
from pulsarkit.analysis.orphans import OrphanCleanupPlan, cleanup_plan, disk_usage_rows, find_orphans
from pulsarkit.bookkeeper.digest import pack_entry
from pulsarkit.broker.compaction import Compactor
from pulsarkit.cli import main
from pulsarkit.errors import PlanFormatError
from pulsarkit.managed_ledger.ledger_handle import LedgerHandle
from pulsarkit.metadata.store import MetadataStore
from pulsarkit.scan.datadir import open_data_dir

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
        assert {i.ledger_id for i in plan.items} == set(made.values()) - {made["no_owner"]}
        assert plan.bytes == sum(i.bytes_on_bookie for i in plan.items) > 0
        assert all(i.reason.startswith(f"{i.category} (safe): ") for i in plan.items)
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
    # per log, the next step is GC's candidate rule (a log under a level's threshold) on the log's usage
    assert main(["du", str(tmp_path / "d"), "--json"]) == 0
    logs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    steps = {"minor": "minor compaction reclaims it", "major": "major compaction reclaims it"}
    for g in logs:
        level = "minor" if g["usage"] < 0.2 else "major" if g["usage"] < 0.5 else None
        want = "nothing to reclaim" if not g["dead"] else steps.get(level, "kept: usage above both thresholds")
        assert g["next_step"] == want, g
    assert any(g["dead"] for g in logs)


# ---------------------------------------------------------------------------------- cleanup execute


def _plan(root):
    with open_data_dir(root) as dd:
        return cleanup_plan(dd)


def _metadata_ids(root):
    with pk.Store.open(root) as store:
        return set(store.metadata.ledger_ids())


def test_cleanup_dry_run_is_the_plan_then_execute_deletes_exactly_the_plan(tmp_path):
    made = build(tmp_path / "d")
    plan = _plan(tmp_path / "d")
    before = _metadata_ids(tmp_path / "d")
    planned = {i.ledger_id for i in plan.to_delete}  # the dry run: the plan alone
    # on_disk_only has no metadata to delete; no_owner is 'review' and not in a default plan
    assert planned == set(made.values()) - {made["no_owner"], made["on_disk_only"]}
    assert _metadata_ids(tmp_path / "d") == before
    res = execute(plan, backup_dir=tmp_path / "bak")
    assert [i.ledger_id for i in res.to_delete] == [i.ledger_id for i in plan.to_delete]
    assert set(res.deleted) == planned == set(res.backed_up)
    assert _metadata_ids(tmp_path / "d") == before - planned
    # the topic is untouched: every message still reads, and nothing the plan deleted is an orphan any more
    with open_data_dir(tmp_path / "d") as dd:
        assert len([e for _, e in dd.ml_entries(ML) if isinstance(e, bytes)]) == 5
        left = {f.ledger_id: f.category for f in find_orphans(dd)}
    assert made["no_owner"] in left and all(left[lid] == "on_disk_only" for lid in planned)
    # the backup holds each ledger's node and every entry, digest-checked when it was read
    import pyarrow.ipc as ipc

    for lid in planned:
        t = ipc.open_file(str(tmp_path / "bak" / f"ledger-{lid}" / "entries.arrow")).read_all()
        assert t.column("entry_id").to_pylist() == [0, 1] and all(len(d) > 100 for d in t.column("data").to_pylist())
    # running the same plan again is harmless (a crash mid-way is recovered by rerunning it)
    again = execute(plan)
    assert again.deleted == [] and {s.why for s in again.skipped} == {"already deleted"}
    # the backup holds the entries: private, and written only into the directory given
    assert all(
        (p.stat().st_mode & 0o777) == (0o700 if p.is_dir() else 0o600)
        for p in [tmp_path / "bak", *(tmp_path / "bak").rglob("*")]
    )
    # and the backup restores the metadata
    assert sorted(restore_backup(tmp_path / "bak", tmp_path / "d" / "metadata")) == sorted(planned)
    assert _metadata_ids(tmp_path / "d") == before


def test_cleanup_rechecks_each_item_against_the_current_state(tmp_path):
    made = build(tmp_path / "d")
    plan = _plan(tmp_path / "d")
    with pk.Store.open(tmp_path / "d") as store:
        # after the plan: one orphan's metadata changes, and the deleted subscription comes back
        lid = made["owner_gone"]
        md, stat = store.metadata.ledger_metadata(lid)
        store.metadata.put_ledger_metadata(lid, md, expected_version=stat.version)
        store.managed_ledger(ML).open_cursor("old-sub", "earliest")
    res = execute(plan)
    why = {s.id: s.why for s in res.skipped}
    assert {s.kind for s in res.skipped} == {"ledger"}
    assert why[made["owner_gone"]] == "its metadata changed since the plan"
    assert made["owner_gone"] not in res.deleted
    assert set(res.deleted) == {made["old_compacted"], made["schema_of_deleted"], made["deleted_subscription"]} - {
        lid for lid in why
    }


def test_cleanup_refuses_inconsistent_inputs_and_foreign_plans(tmp_path):
    build(tmp_path / "d")
    plan = _plan(tmp_path / "d")
    with pytest.raises(OrphanCleanupError, match="not an orphan cleanup plan"):
        execute({"kind": "orphan-ledger-cleanup"})  # type: ignore[arg-type]
    with pytest.raises(PlanFormatError, match="not a 'orphan-ledger-cleanup' plan") as e:
        OrphanCleanupPlan.from_json('{"kind": "bookie-gc", "format_version": 1}')
    assert e.value.field == "kind"
    with open_data_dir(tmp_path / "d") as dd:
        first = dd.ml_ledgers(ML)[0]
    with pk.Store.open(tmp_path / "d") as store:
        # a ledger the topic lists loses its metadata and its entries: data loss, so nothing is deleted
        store.delete_ledger(first)
        store.flush()
    with open_data_dir(tmp_path / "d") as dd:
        cats = {f.ledger_id: f.category for f in find_orphans(dd)}
    if cats.get(first) != "missing":
        pytest.fail(f"setting up a missing ledger failed: {cats.get(first)}")
    with pytest.raises(OrphanCleanupError, match="inconsistent"):
        execute(plan)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("mine")
    with pytest.raises(OrphanCleanupError, match="not empty"):
        execute(plan, backup_dir=tmp_path / "full")
    # a backup directory that is a link to (an empty) one elsewhere is refused: nothing is written there
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "bak-link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OrphanCleanupError, match="symbolic link"):
        execute(plan, backup_dir=tmp_path / "bak-link")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_cli_orphans_cleanup_dry_run_then_execute(tmp_path, capsys):
    build(tmp_path / "d")
    plan = tmp_path / "plan.json"
    assert main(["orphans", str(tmp_path / "d"), "--plan", str(plan)]) == 0
    capsys.readouterr()
    assert main(["orphans-cleanup", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "would delete the metadata of 4 ledger(s)" in out and "--execute" in out
    assert main(["orphans-cleanup", str(plan), "--execute", "--backup", str(tmp_path / "b"), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(res["deleted"]) == 4 and sorted(res["backed_up"]) == sorted(res["deleted"])


def test_a_plan_made_with_relative_paths_executes_from_another_directory(tmp_path, capsys, monkeypatch):
    """Issue 21 item 10: the plan stored the data directory as given, so a run from elsewhere blamed
    the database instead of reading the same store."""
    build(tmp_path / "d")
    monkeypatch.chdir(tmp_path)
    assert main(["orphans", "d", "--plan", "plan.json"]) == 0
    p = json.loads((tmp_path / "plan.json").read_text())
    assert os.path.isabs(p["metadata_dir"]) and all(os.path.isabs(d) for d in p["ledger_dirs"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["orphans-cleanup", "../plan.json", "--execute", "--backup", "b", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["deleted"]) == 4


# ------------------------------------------------------------------ backups of open ledgers, backup paths

GONE = "public/default/persistent/gone"


def open_ledger(store, custom, entry_ids):
    """An OPEN ledger holding exactly ``entry_ids`` on the bookie (gaps as a crashed writer leaves them)."""
    h = LedgerHandle.create(store, {k: v.encode() for k, v in custom.items()}, "CRC32C")
    for eid in entry_ids:
        add_raw_entry(store, h.ledger_id, eid)
    return h.ledger_id


def add_raw_entry(store, lid, eid):
    data = pk.encode_entry(pk.message_metadata("p", eid, 1_700_000_000_000 + eid), b"x" * 100)
    store.bookie.add_entry(pack_entry(lid, eid, data, last_add_confirmed=eid - 1, length=0, digest_type="CRC32C"))


def build_open_orphans(root):
    """The topic, and two OPEN ledgers of a deleted managed ledger: entries 0-4 and 6-9; entries 2-3 only."""
    with pk.Store.open(root) as store:
        store.managed_ledger(ML).add_entry(pk.encode_entry(pk.message_metadata("p", 0, 1_700_000_000_000), b"v"))
        custom = {"application": "pulsar", "component": "managed-ledger", "pulsar/managed-ledger": GONE}
        gap = open_ledger(store, custom, [0, 1, 2, 3, 4, 6, 7, 8, 9])
        no_first = open_ledger(store, custom, [2, 3])
        store.flush()
    return gap, no_first


def test_the_backup_of_an_open_ledger_holds_every_entry_the_bookie_holds(tmp_path, capsys):
    """An OPEN ledger's last_entry_id ends at its first gap: the backup once stopped there (5 of 9 entries,
    none when entry 0 is absent) and the metadata was deleted anyway, leaving the rest to the bookie's GC."""
    gap, no_first = build_open_orphans(tmp_path / "d")
    plan = tmp_path / "plan.json"
    assert main(["orphans", str(tmp_path / "d"), "--plan", str(plan)]) == 0
    items = {i["ledger_id"]: i for i in json.loads(plan.read_text())["items"]}
    assert (items[gap]["category"], items[gap]["state"]) == ("owner_gone", "OPEN")
    capsys.readouterr()
    assert main(["orphans-cleanup", str(plan), "--execute", "--backup", str(tmp_path / "b"), "--json"]) == 0
    assert sorted(json.loads(capsys.readouterr().out)["deleted"]) == sorted([gap, no_first])
    import pyarrow.ipc as ipc

    for lid, held, runs in ((gap, [0, 1, 2, 3, 4, 6, 7, 8, 9], [[0, 4], [6, 9]]), (no_first, [2, 3], [[2, 3]])):
        d = tmp_path / "b" / f"ledger-{lid}"
        t = ipc.open_file(str(d / "entries.arrow")).read_all()
        assert t.column("entry_id").to_pylist() == held
        assert all(len(x) > 100 for x in t.column("data").to_pylist())
        doc = json.loads((d / "item.json").read_text())
        assert (doc["entries_backed_up"], doc["entry_ids_backed_up"]) == (len(held), runs)
        assert doc["entries_on_bookie"] == items[lid]["entries_on_bookie"] == len(held)  # what the plan saw


def test_an_open_ledger_whose_entries_changed_since_the_plan_is_skipped(tmp_path):
    """Entries added to an OPEN ledger change no metadata version: the re-check compares what the bookies
    hold with what the plan saw, so neither the backup nor the delete covers entries nobody reviewed."""
    gap, no_first = build_open_orphans(tmp_path / "d")
    plan = _plan(tmp_path / "d")
    with pk.Store.open(tmp_path / "d") as store:
        add_raw_entry(store, gap, 10)
        store.flush()
    res = execute(plan, backup_dir=tmp_path / "b")
    assert [(s.id, s.why) for s in res.skipped] == [
        (gap, "its entries on the bookies changed since the plan (10 held, 9 planned)")
    ]
    assert res.deleted == res.backed_up == [no_first]
    assert gap in _metadata_ids(tmp_path / "d") and not (tmp_path / "b" / f"ledger-{gap}").exists()


def test_a_backup_inside_the_stores_the_plan_reads_is_refused(tmp_path, capsys):
    build(tmp_path / "d")
    plan = _plan(tmp_path / "d")
    before = _metadata_ids(tmp_path / "d")
    for inside in (Path(plan.metadata_dir) / "x", Path(plan.ledger_dirs[0]), Path(plan.ledger_dirs[0]) / "a" / "b"):
        with pytest.raises(OrphanCleanupError, match="which the plan reads"):
            execute(plan, backup_dir=inside)
        assert not (inside / "ledger-3").exists() and not (Path(plan.metadata_dir) / "x").exists()
    # through a link to the store too: the link's target is what would be written
    (tmp_path / "to-md").symlink_to(plan.metadata_dir)
    with pytest.raises(OrphanCleanupError, match="which the plan reads"):
        execute(plan, backup_dir=tmp_path / "to-md" / "x")
    plan_file = tmp_path / "plan.json"
    plan.write(str(plan_file))
    assert main(["orphans-cleanup", str(plan_file), "--execute", "--backup", plan.metadata_dir + "/x"]) != 0
    assert "which the plan reads" in capsys.readouterr().err
    assert _metadata_ids(tmp_path / "d") == before


def test_the_backup_directories_made_are_durable_before_any_delete(tmp_path, monkeypatch):
    """Each directory the backup creates is named in its parent, fsynced before the first delete: else a crash
    can keep the deletes and lose the backup."""
    build(tmp_path / "d")
    plan = _plan(tmp_path / "d")
    events = []
    fsync_dir = durable.fsync_dir
    monkeypatch.setattr(durable, "fsync_dir", lambda p: (events.append(("fsync", Path(p))), fsync_dir(p)))
    delete = MetadataStore.delete
    monkeypatch.setattr(
        MetadataStore, "delete", lambda self, *a, **k: (events.append(("delete",)), delete(self, *a, **k))
    )
    root = tmp_path / "new" / "a" / "b"
    res = execute(plan, backup_dir=root)
    assert res.deleted
    first_delete = events.index(("delete",))
    synced = {e[1] for e in events[:first_delete] if e[0] == "fsync"}
    assert {tmp_path, tmp_path / "new", tmp_path / "new" / "a"} <= synced


def test_a_cursor_or_compacted_ledger_a_broker_may_be_switching_to_is_for_review(tmp_path):
    """A new cursor ledger is written before the cursor is switched to it (createNewMetadataLedger, then
    switchToNewLedger), and a compaction writes its ledger before the ``__compaction`` cursor names it: OPEN
    and newer than the ledger in use, such a ledger is 'review', as a managed ledger's newest unlisted one is."""
    build(tmp_path / "d")
    topic = "persistent://public/default/orders"
    compacted = {"application": "pulsar", "component": "compacted-ledger", "pulsar/compactedTopic": topic}
    cursor = {"application": "pulsar", "component": "managed-ledger", "pulsar/managed-ledger": ML}
    with pk.Store.open(tmp_path / "d") as store:
        old_open = open_ledger(store, compacted, [0])  # a compaction that died, then one that finished
        ml = store.managed_ledger(ML)
        ml.add_entry(pk.encode_entry(pk.message_metadata("p", 9, 1_700_000_000_009, partition_key="k"), b"w"))
        Compactor(store, ml).compact()
        writing = open_ledger(store, compacted, [0])
        sub_closed = ledger(store, cursor | {"pulsar/cursor": "sub"})
        sub_next = open_ledger(store, cursor | {"pulsar/cursor": "sub"}, [0])
        store.flush()
    with open_data_dir(tmp_path / "d") as dd:
        found = {f.ledger_id: f for f in find_orphans(dd)}
        plan = cleanup_plan(dd)
    got = {lid: (found[lid].category, found[lid].verdict) for lid in (old_open, writing, sub_closed, sub_next)}
    assert got == {
        old_open: ("old_compacted", "safe"),  # OPEN, but older than the compacted ledger in use
        writing: ("old_compacted", "review"),
        sub_closed: ("no_owner", "safe"),
        sub_next: ("no_owner", "review"),
    }
    assert "possibly a compaction still writing it" in found[writing].evidence
    assert "possibly its replacement" in found[sub_next].evidence
    assert {writing, sub_next}.isdisjoint(i.ledger_id for i in plan.items)


# ---------------------------------------------------------------------------------- owners this reader might misname

V1 = "prop/us-west/ns/persistent/legacy-topic"  # persistent://prop/us-west/ns/legacy-topic, Pulsar's v1 naming


def _topic(store, name, n=3):
    """A managed ledger of ``n`` messages over two-entry ledgers and a subscription ``sub``."""
    ml = store.managed_ledger(name, pk.ManagedLedgerConfig(max_entries_per_ledger=2, minimum_rollover_time_ms=0))
    for i in range(n):
        ml.add_entry(pk.encode_entry(pk.message_metadata("p", i, 1000 + i), b"v%d" % i))
    c = ml.open_cursor("sub", "earliest")
    c.mark_delete(ml.last_confirmed_entry)
    return ml


def test_a_v1_topic_is_read_like_a_v2_one_and_its_ledgers_are_no_orphans(tmp_path, capsys):
    from pulsarkit.analysis.messages import read_messages

    with pk.Store.open(tmp_path / "d") as store:
        assert len(_topic(store, V1).ledgers()) == 2
        store.flush()
    with open_data_dir(tmp_path / "d") as dd:
        assert list(dd.ml_infos) == [V1]
        assert [t.name for t in dd.topics()] == ["persistent://prop/us-west/ns/legacy-topic"]
        [cur] = dd.cursors(V1)
        assert cur.name == "sub" and cur.mark_delete.entry_id >= 0
        rows = list(read_messages(dd, "persistent://prop/us-west/ns/legacy-topic"))
        assert [r["sequence_id"] for r in rows] == [0, 1, 2]
        assert find_orphans(dd) == [] and cleanup_plan(dd).to_delete == []
        assert dd.issues == []
    assert main(["topics", str(tmp_path / "d")]) == 0
    assert "persistent://prop/us-west/ns/legacy-topic" in capsys.readouterr().out
    assert main(["messages", str(tmp_path / "d"), "--topic", "persistent://prop/us-west/ns/legacy-topic"]) == 0
    assert capsys.readouterr().out.count("persistent://prop/us-west/ns/legacy-topic") == 3


def test_ledgers_of_a_managed_ledger_no_topic_name_fits_are_review_and_an_issue(tmp_path):
    odd = "prop/us west/ns/persistent/t"  # a cluster name Pulsar refuses: not read as a topic
    with pk.Store.open(tmp_path / "d") as store:
        _topic(store, odd)
        store.flush()
    with open_data_dir(tmp_path / "d") as dd:
        assert dd.ml_infos == {}
        assert [i.kind for i in dd.issues] == ["unrecognised_managed_ledger"] * 2  # the ledger and its cursor
        found = find_orphans(dd)
        assert found and {f.verdict for f in found} == {"review"}, found
        assert all(f"/managed-ledgers/{odd}" in f.evidence for f in found)
        assert cleanup_plan(dd).to_delete == []


def test_a_cursor_node_not_read_keeps_its_ledger_from_being_safe(tmp_path):
    with pk.Store.open(tmp_path / "d") as store:
        _topic(store, ML)
        base = {"application": "pulsar", "component": "managed-ledger"}
        lid = ledger(store, base | {"pulsar/managed-ledger": ML, "pulsar/cursor": "sub"})
        store.flush()
    with open_data_dir(tmp_path / "d") as dd:
        [f] = find_orphans(dd)  # an old ledger of a live subscription
        assert (f.ledger_id, f.category, f.verdict) == (lid, "no_owner", "safe")
        # as if the cursor's node had been misread: the ledger looks like a deleted subscription's
        dd.cursor_infos[ML].clear()
        dd._cursor_cache.clear()
        [f] = find_orphans(dd)
        assert (f.ledger_id, f.category, f.verdict) == (lid, "deleted_subscription", "review")
        assert f"/managed-ledgers/{ML}/sub" in f.evidence
