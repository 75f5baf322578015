"""Bookie GC on pulsarkit's own bookie, as BookKeeper's ``GarbageCollectorThreadTest`` and
``CompactionTest`` check it: ledgers gone from metadata are deleted, logs with nothing live are removed,
logs under the threshold are compacted (minor/major, force, suspend, max time, throttle), every live entry
stays readable with a valid digest, and nothing dead comes back."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pulsarkit as pk
import pytest
from pulsarkit.bookkeeper.gc import (
    DiskPressure,
    GarbageCollector,
    GcConfig,
    GcPlan,
    GcRequest,
    GcState,
    log_usage,
    reclaiming_level,
    select_for_compaction,
)
from pulsarkit.cli import main
from pulsarkit.errors import BookieError
from pulsarkit.plan import Skipped

FAST = dict(
    compaction_rate_by_entries=0,
    gc_wait_time_ms=1000,
    minor_compaction_interval_s=1,
    major_compaction_interval_s=2,
    # the machine's real fill level must not change what these tests plan (see the disk pressure test)
    disk_usage_warn_threshold=1.01,
    disk_usage_threshold=1.01,
)


def fill(store, topics=4, entries=60, size=2000):
    """Interleaved topics, so every entry log holds several ledgers."""
    mls = [store.managed_ledger(f"public/default/persistent/t{i}") for i in range(topics)]
    for e in range(entries):
        for ml in mls:
            ml.add_entry(pk.encode_entry(pk.message_metadata("p", e, 1_700_000_000_000 + e), bytes([e % 256]) * size))
        if e % 10 == 9:
            store.flush()
    store.flush()
    return mls


@pytest.fixture
def small_logs(tmp_path):
    s = pk.Store.open(tmp_path / "d", log_size_limit=64 << 10)
    yield s
    s.close()


def gc(store, **kw):
    return GarbageCollector(store.bookie.dirs[0], store.metadata, GcConfig(**{**FAST, **kw}), fsync=False)


def drop_metadata(store, ml, which=0):
    """Deletes the metadata of one of ``ml``'s ledgers (closed first), the bookie still holding it: what GC
    must reclaim. Returns its id."""
    lid = ml.ledgers()[which].ledger_id
    ml.close()
    store.metadata.delete_ledger_metadata(lid)
    return lid


def live_entries(mls):
    return {(ml.name, p): d for ml in mls for p, d in ml.read_after(pk.Position(-1, -1))}


def log_bytes(store):
    cur = store.bookie.dirs[0].current
    return sum(os.path.getsize(os.path.join(cur, f)) for f in os.listdir(cur) if f.endswith(".log"))


def test_deleting_topics_then_gc_reclaims_and_keeps_every_live_entry(small_logs):
    store = small_logs
    mls = fill(store)
    before = live_entries(mls[2:])
    for ml in mls[:2]:  # two topics go: their ledgers leave metadata and the bookie index
        ml.delete()
    bytes_before = log_bytes(store)
    g = gc(store, major_compaction_threshold=0.8, minor_compaction_threshold=0.2)
    plan = g.plan(GcRequest(force=True))
    assert plan.compaction.level == "major" and plan.compaction.logs
    assert all(it.reason for it in plan.items)
    assert GcPlan.from_json(plan.to_json()) == plan  # reviewable: the file is the plan
    res = g.execute(plan)
    assert res.compacted_logs and res.reclaimed_bytes > 0
    assert log_bytes(store) < bytes_before * 0.7
    assert live_entries(mls[2:]) == before  # every live entry, digest verified on read
    assert gc(store).plan(GcRequest(force=True)).compaction.logs == []  # nothing left under the threshold


def test_ledgers_missing_from_metadata_are_deleted_and_logs_with_nothing_live_removed(small_logs):
    store = small_logs
    mls = fill(store, topics=1, entries=120)
    lid = drop_metadata(store, mls[0])
    g = gc(store)
    plan = g.plan()
    assert [d.ledger_id for d in plan.ledgers_to_delete] == [lid]
    assert plan.logs_to_remove  # the log(s) holding only that ledger
    res = g.execute(plan)
    assert res.deleted_ledgers == [lid] and res.removed_logs
    assert not store.bookie.ledger_exists(lid)


def test_verify_metadata_on_gc_never_deletes_on_a_failed_read(small_logs):
    store = small_logs
    fill(store, topics=1, entries=10)

    class Flaky:
        def ledger_ids(self):
            return []  # the range scan misses every ledger

        def ledger_metadata(self, lid):
            raise pk.PulsarkitError("metadata store timeout")

        def next_ledger_id(self):
            return store.metadata.next_ledger_id()  # the ledgers were issued: the scan alone fails

        def cluster_instance_id(self):
            return None

    g = GarbageCollector(store.bookie.dirs[0], Flaky(), GcConfig(**FAST, verify_metadata_on_gc=True), fsync=False)
    assert g.plan().ledgers_to_delete == []


def test_levels_intervals_force_and_suspend(small_logs):
    store = small_logs
    mls = fill(store)
    mls[0].delete()
    t = [10_000_000]
    g = GarbageCollector(
        store.bookie.dirs[0],
        store.metadata,
        GcConfig(**{**FAST, "minor_compaction_interval_s": 3600, "major_compaction_interval_s": 86400}),
        state=GcState(last_minor_ms=t[0] - 1000, last_major_ms=t[0] - 1000),
        clock_ms=lambda: t[0],
        fsync=False,
    )
    assert g.plan().compaction.level is None  # neither interval has passed
    assert g.plan(GcRequest(force=True)).compaction.level == "major"
    assert g.plan(GcRequest(force=True, suspend_major=True)).compaction.level == "minor"
    assert g.plan(GcRequest(force=True, suspend_major=True, suspend_minor=True)).compaction.level is None
    t[0] += 3600_000
    assert g.plan().compaction.level == "minor"


def test_disk_pressure_suspends_major_then_minor_or_forces_a_run(small_logs):
    """SingleDirectoryDbLedgerStorage's disk listener: almost full suspends major compaction, full
    suspends both; with isForceGCAllowWhenNoSpace either one forces a run instead."""
    store = small_logs
    mls = fill(store)
    mls[0].delete()
    t = [10_000_000]
    kw = dict(state=GcState(last_minor_ms=t[0] - 1000, last_major_ms=t[0] - 1000), clock_ms=lambda: t[0], fsync=False)
    cfg = {**FAST, "minor_compaction_interval_s": 3600, "major_compaction_interval_s": 86400}
    cfg.update(disk_usage_warn_threshold=0.90, disk_usage_threshold=0.95)
    cfg.update(minor_compaction_threshold=0.8, major_compaction_threshold=0.9)
    g = GarbageCollector(store.bookie.dirs[0], store.metadata, GcConfig(**cfg), **kw)
    level = lambda **a: g.plan(GcRequest(**a)).compaction.level  # noqa: E731
    assert level(force=True, disk_usage=0.5) == "major"
    assert level(force=True, disk_usage=0.92) == "minor"  # almost full: major suspended
    assert level(force=True, disk_usage=0.97) is None  # full: both suspended
    assert g.plan(GcRequest(disk_usage=0.97)).disk_pressure == DiskPressure(
        disk_usage=0.97, state="full", force=False, suspend_major=True, suspend_minor=True
    )
    g = GarbageCollector(store.bookie.dirs[0], store.metadata, GcConfig(**cfg, force_gc_allow_when_no_space=True), **kw)
    assert level(disk_usage=0.5) is None  # no interval has passed, nothing forces a run
    p = g.plan(GcRequest(disk_usage=0.97))
    assert p.forced and p.compaction.level == "major" and p.compaction.logs
    assert 0.0 <= g.disk_pressure().disk_usage <= 1.0  # measured on the directory when not given


def test_the_compaction_rule_is_lowest_bucket_first_then_log_id():
    """``doCompactEntryLogs``' order, the one whatif replays: usage buckets of 10%, then log id (not
    usage: 0.15 and 0.12 share bucket 1, so log 1 goes before log 2)."""
    logs = [("a", 1, 0.15), ("b", 2, 0.12), ("c", 3, 0.05), ("d", 4, 0.5), ("e", 0, 0.19)]
    assert select_for_compaction(logs, 0.2) == [("c", 0.05), ("e", 0.19), ("a", 0.15), ("b", 0.12)]
    assert select_for_compaction(logs, 0.0) == []
    cfg = GcConfig(use_target_entry_log_size_for_gc=True, log_size_limit=1000)
    assert log_usage(50, 100, GcConfig()) == 0.5 and log_usage(50, 100, cfg) == 0.05
    assert log_usage(100, 100, cfg) == 1.0 and log_usage(0, 0, GcConfig()) == 1.0


def test_the_level_that_reclaims_a_log_is_the_candidate_rule():
    """A log is a candidate of a level when its usage is under that level's threshold (what
    ``select_for_compaction`` keeps); ``pulsarkit du`` and the disk-usage reasons say the same."""
    assert [reclaiming_level(u, 0.2, 0.5) for u in (0.0, 0.19, 0.2, 0.49, 0.5, 1.0)] == [
        "minor",
        "minor",
        "major",
        "major",
        None,
        None,
    ]
    for u in (0.1, 0.2, 0.3):
        assert (reclaiming_level(u, 0.2, 0.5) == "minor") == bool(select_for_compaction([("x", 1, u)], 0.2))


def test_config_validation():
    with pytest.raises(BookieError):
        GcConfig(minor_compaction_threshold=0.6, major_compaction_threshold=0.5).validate()
    with pytest.raises(BookieError):
        GcConfig(minor_compaction_interval_s=90_000).validate()
    with pytest.raises(BookieError):
        GcConfig(major_compaction_threshold=1.5).validate()


def test_a_stale_plan_is_rechecked(small_logs):
    store = small_logs
    mls = fill(store)
    mls[0].delete()
    g = gc(store, major_compaction_threshold=0.8)
    plan = g.plan(GcRequest(force=True))
    assert plan.compaction.logs
    first = plan.compaction.logs[0]
    # as if the log changed after planning
    changed = replace(first, total_size=first.total_size + 1)
    plan = replace(plan, compaction=replace(plan.compaction, logs=[changed, *plan.compaction.logs[1:]]))
    res = g.execute(plan)
    assert Skipped("compaction", first.log_id, "the log changed since the plan") in res.skipped
    assert first.log_id not in {c.log_id for c in res.compacted_logs}


def test_throttle_sleeps_for_its_rate(small_logs, monkeypatch):
    import pulsarkit.bookkeeper.gc as gc_module

    # a clock that does not move: the copy takes no time, so each sleep is exactly what the rate asks
    # (with the real clock the sleep is shortened by the copy's own time, which varies with the load)
    monkeypatch.setattr(gc_module.time, "monotonic", lambda: 100.0)
    store = small_logs
    mls = fill(store)
    mls[0].delete()
    mls[1].delete()
    slept = []
    g = GarbageCollector(
        store.bookie.dirs[0],
        store.metadata,
        GcConfig(**{**FAST, "compaction_rate_by_entries": 100, "major_compaction_threshold": 0.8}),
        sleep=slept.append,
        fsync=False,
    )
    res = g.execute(g.plan(GcRequest(force=True)))
    assert res.compacted_logs and len(slept) == len(res.compacted_logs)
    for s_, c in zip(slept, res.compacted_logs, strict=True):  # 100 entries/s: a copy of n entries takes n/100 s
        assert s_ == pytest.approx(c.entries / 100)


def test_max_time_stops_between_logs(small_logs):
    store = small_logs
    mls = fill(store)
    mls[0].delete()
    mls[1].delete()
    g = GarbageCollector(
        store.bookie.dirs[0],
        store.metadata,
        GcConfig(
            **{
                **FAST,
                "compaction_rate_by_entries": 2000,
                "major_compaction_threshold": 0.8,
                "major_compaction_max_time_ms": 1,
            }
        ),
        fsync=False,
    )
    plan = g.plan(GcRequest(force=True))
    assert len(plan.compaction.logs) >= 2
    res = g.execute(plan)
    assert res.stopped_by_max_time and len(res.compacted_logs) == 1


def test_cli_gc_plans_by_default_then_executes_the_reviewed_plan(tmp_path, capsys):
    """``pulsarkit gc``: the manual trigger, offline. A dry run writes nothing; --execute applies the
    reviewed plan (re-checked) and every live entry still reads."""
    root = tmp_path / "d"
    with pk.Store.open(root, log_size_limit=64 << 10) as store:
        mls = fill(store)
        before = live_entries(mls[2:])
        for ml in mls[:2]:
            ml.delete()
        bytes_before = log_bytes(store)
    snapshot = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    plan = tmp_path / "plan.json"
    args = ["gc", str(root), "--force", "--major-threshold", "0.8", "--disk-usage", "0.5"]
    assert main([*args, "--plan", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "major compaction" in out and "dry run: nothing was written" in out
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == snapshot
    assert json.loads(plan.read_text())["bookies"][0]["compaction"]["logs"]
    assert main(["gc", str(root), "--execute", "--from-plan", str(plan), "--json"]) == 0
    run = json.loads(capsys.readouterr().out)["bookies"][0]["result"]
    assert run["compacted_logs"] and run["reclaimed_bytes"] > 0
    with pk.Store.open(root, log_size_limit=64 << 10) as store:
        assert log_bytes(store) < bytes_before * 0.7
        mls = [store.managed_ledger(f"public/default/persistent/t{i}") for i in (2, 3)]
        assert live_entries(mls) == before
    assert main(["gc", str(root), "--from-plan", str(plan)]) == 1  # applying a plan needs --execute


def test_the_embedded_store_reclaims_space_after_retention_deletes_ledgers(small_logs):
    """Store.garbage_collect: pulsarkit's own bookie, after retention trimmed consumed ledgers."""
    store = small_logs
    cfg = pk.ManagedLedgerConfig(max_entries_per_ledger=20, minimum_rollover_time_ms=0, retention_time_ms=0)
    ml = store.managed_ledger("public/default/persistent/retained", cfg)
    other = fill(store, topics=2)
    cur = ml.open_cursor("sub", "earliest")
    for e in range(120):
        ml.add_entry(pk.encode_entry(pk.message_metadata("p", e, 1_700_000_000_000 + e), bytes([e % 256]) * 2000))
    cur.mark_delete(pk.Position(ml.ledgers()[-2].ledger_id, 19))
    assert len(ml.trim_consumed_ledgers().deleted) == 6  # retention 0: all six full, consumed ledgers go
    left = live_entries([ml, *other])
    before = log_bytes(store)
    dry = store.garbage_collect(GcConfig(**{**FAST, "major_compaction_threshold": 0.9}), force=True, dry_run=True)
    assert dry[0].result is None and dry[0].plan.compaction.logs and log_bytes(store) == before
    (run,) = store.garbage_collect(GcConfig(**{**FAST, "major_compaction_threshold": 0.9}), force=True)
    assert run.result is not None and run.result.reclaimed_bytes > 0 and log_bytes(store) < before
    assert live_entries([ml, *other]) == left


def test_cli_gc_execute_refuses_a_metadata_store_another_process_holds(tmp_path):
    """A broker running on the metadata store (here: another process holding it open) while the bookie is
    stopped: ``gc --execute`` would delete by metadata that is changing under it, so it refuses in one
    line naming the holder, and changes nothing; the dry run still reads."""
    import subprocess
    import sys

    from pulsarkit.scan.bookie_dir import find_layout

    root = tmp_path / "d"
    with pk.Store.open(root, log_size_limit=64 << 10) as store:
        for ml in fill(store)[:2]:
            ml.delete()
    md_dir, _ = find_layout(root)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pulsarkit.metadata.store import MetadataStore\n"
            f"s = MetadataStore({str(md_dir)!r}); print('ready', flush=True); sys.stdin.read(); s.close()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        snapshot = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file() and p.parent != md_dir}
        cmd = [sys.executable, "-m", "pulsarkit", "gc", str(root), "--force", "--execute"]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert r.returncode != 0 and "Traceback" not in r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert (
            line.startswith("pulsarkit gc: error: metadata store ")
            and f"in use by another process (pid {holder.pid})" in line
        )
        assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file() and p.parent != md_dir} == snapshot
        r = subprocess.run(cmd[:-1], capture_output=True, text=True, timeout=120)  # the dry run only reads
        assert r.returncode == 0, r.stderr
    finally:
        holder.communicate("", timeout=60)
    # released: the same command now runs
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def _immutable(path):
    """``chattr +i``: a directory nothing may write, root included (where permissions cannot show it)."""
    import shutil
    import subprocess

    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here")


def test_cli_gc_execute_on_a_read_only_bookie_index_says_read_only(tmp_path):
    """A store that cannot be written is reported as read-only, not as "not a readable RocksDB database"
    (nor as held by another process)."""
    import subprocess
    import sys

    root = tmp_path / "d"
    with pk.Store.open(root, log_size_limit=64 << 10) as store:
        for ml in fill(store, topics=2)[:1]:
            ml.delete()
    (locations,) = [p for p in root.rglob("locations") if p.is_dir()]
    _immutable(locations)
    try:
        r = subprocess.run(
            [sys.executable, "-m", "pulsarkit", "gc", str(root), "--force", "--execute"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        subprocess.run(["chattr", "-i", str(locations)], check=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert f"bookie index {locations} is read-only" in line, line
    assert "not a readable" not in line and "in use" not in line


# -- metadata that cannot be this bookie's: refused before anything is planned -------------------------------


def _cookie(ledger_dir, instance):
    """A bookie cookie (layout 4, text format) naming cluster ``instance``, as real bookies write it."""
    cur = os.path.join(ledger_dir, "current")
    with open(os.path.join(cur, "VERSION"), "w") as f:
        f.write(f'4\nbookieHost: "127.0.0.1:3181"\njournalDir: "j"\nledgerDirs: "1\\tl"\ninstanceId: "{instance}"\n')


def test_gc_refuses_metadata_of_another_cluster(small_logs):
    store = small_logs
    mls = fill(store, topics=2, entries=10)
    lid = drop_metadata(store, mls[0])
    _cookie(store.bookie.dirs[0].ledger_dir, "cluster-a")
    store.metadata.put("/ledgers/INSTANCEID", b"cluster-b")
    with pytest.raises(BookieError, match="cookie is of cluster cluster-a, the metadata is of cluster cluster-b"):
        gc(store).plan()
    store.metadata.put("/ledgers/INSTANCEID", b"cluster-a\n", expected_version=0)
    assert [d.ledger_id for d in gc(store).plan().ledgers_to_delete] == [lid]  # the same cluster: as before


def test_gc_refuses_metadata_older_than_the_bookie(tmp_path):
    """A copy of the metadata taken before a topic was created lacks that topic's ledgers: GC against it
    would delete them. Their ids are past what the copy's id generator had issued, so it refuses."""
    import shutil

    from pulsarkit.bookkeeper.ledger_storage import SingleDirectoryDbLedgerStorage
    from pulsarkit.metadata.store import MetadataStore

    s = pk.Store.open(tmp_path / "d", log_size_limit=64 << 10)
    fill(s, topics=2, entries=10)
    md_path, ledger_dir = s.metadata.path, s.bookie.dirs[0].ledger_dir
    s.close()
    shutil.copytree(md_path, tmp_path / "old-metadata")
    s = pk.Store.open(tmp_path / "d", log_size_limit=64 << 10)
    newer = s.managed_ledger("public/default/persistent/newer")
    newer.add_entry(pk.encode_entry(pk.message_metadata("p", 0, 1_700_000_000_000), b"x" * 100))
    s.flush()
    newest = newer.ledgers()[-1].ledger_id
    s.close()
    storage = SingleDirectoryDbLedgerStorage(ledger_dir, read_only=False)
    empty = MetadataStore(tmp_path / "empty")
    try:
        with MetadataStore(tmp_path / "old-metadata", read_only=True) as old:
            assert old.next_ledger_id() <= newest
            g = GarbageCollector(storage, old, GcConfig(**FAST), fsync=False)
            with pytest.raises(BookieError, match="older than this bookie"):
                g.plan()
        # a store of nothing (another cluster's, or a wrong path): every ledger would go
        with pytest.raises(BookieError, match=r"holds \d+ ledger\(s\) the metadata cannot have deleted"):
            GarbageCollector(storage, empty, GcConfig(**FAST), fsync=False).plan()
        # the plan made on the current metadata, executed against the old copy: refused too
        with MetadataStore(md_path, read_only=True) as current:
            plan = GarbageCollector(storage, current, GcConfig(**FAST), fsync=False).plan()
        with MetadataStore(tmp_path / "old-metadata", read_only=True) as old:
            forged = replace(plan, ledgers_to_delete=[pk.bookkeeper.gc.LedgerToDelete(newest, "forged")])
            with pytest.raises(BookieError, match="older than this bookie"):
                GarbageCollector(storage, old, GcConfig(**FAST), fsync=False).execute(forged)
        assert storage.ledger_data[newest].exists
    finally:
        empty.close()
        storage.close()


def test_gc_still_deletes_the_newest_ledger_once_its_topic_is_deleted(small_logs):
    """The refusal above must not keep a ledger the cluster did delete: the newest ledger of a deleted topic
    is above every ledger left in the metadata, but its id was issued, so it goes."""
    store = small_logs
    fill(store, topics=1, entries=10)
    last = store.managed_ledger("public/default/persistent/last")
    last.add_entry(pk.encode_entry(pk.message_metadata("p", 0, 1_700_000_000_000), b"x" * 100))
    store.flush()
    lid = drop_metadata(store, last, -1)
    assert lid > max(store.metadata.ledger_ids(), default=-1)
    plan = gc(store).plan()
    assert lid in [d.ledger_id for d in plan.ledgers_to_delete]


def test_compaction_makes_the_new_logs_name_durable_before_the_source_goes(small_logs, monkeypatch):
    """Phase three links ``<dst>.log`` and removes the source: the directory is synced after each link and
    before any removal, so a crash cannot keep the removal and lose the name the index moved to."""
    from pulsarkit.bookkeeper import ledger_storage

    store = small_logs
    mls = fill(store)
    for ml in mls[:2]:
        ml.delete()
    events: list[tuple[str, str]] = []
    real_sync, real_remove, real_link = ledger_storage.fsync_dir, os.remove, os.link

    def sync(p):
        events.append(("sync", str(p)))
        real_sync(p)

    def remove(p):
        events.append(("remove", str(p)))
        real_remove(p)

    def link(a, b):
        events.append(("link", str(b)))
        real_link(a, b)

    monkeypatch.setattr(ledger_storage, "fsync_dir", sync)
    monkeypatch.setattr(os, "remove", remove)
    monkeypatch.setattr(os, "link", link)
    g = gc(store, major_compaction_threshold=0.8, minor_compaction_threshold=0.2)
    res = g.execute(g.plan(GcRequest(force=True)))
    assert res.compacted_logs
    current = store.bookie.dirs[0].current
    links = [i for i, e in enumerate(events) if e[0] == "link"]
    assert links
    for i in links:
        after = events[i + 1 :]
        first_remove = next(j for j, e in enumerate(after) if e[0] == "remove")
        assert ("sync", current) in after[:first_remove], events[i : i + first_remove + 2]
