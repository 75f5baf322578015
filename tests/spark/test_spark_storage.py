"""Disk usage, orphan ledgers, the cleanup plan and bookie GC plans on Spark
(:mod:`pulsarkit.spark.storage`) give exactly the single-process results, on a three-bookie cluster
written with pulsarkit's own writers (with orphans of several classes and deleted ledgers made on
purpose) and on the real Pulsar 4.0.7 standalone's directories (the ``oracle`` fixture of
``tests/interop/standalone/test_datadir_oracle.py``, whose only entry log has no ledgers map, so its
task scans it). The entry logs are read by Spark tasks, not by the driver, and nothing is written."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pulsarkit as pk
import pytest
from datadir_fixtures import BOOKIE_IDS, build_bookies, build_cluster_source, file_hashes
from pulsarkit.analysis.orphans import cleanup_plan, disk_usage_table, orphans_table
from pulsarkit.bookkeeper.gc import GarbageCollector, GcConfig, GcPlan, GcRequest
from pulsarkit.bookkeeper.gc_cluster import GcPlans
from pulsarkit.bookkeeper.ledger_storage import SingleDirectoryDbLedgerStorage
from pulsarkit.cli import main
from pulsarkit.managed_ledger.ledger_handle import LedgerHandle
from pulsarkit.metadata.store import MetadataStore
from pulsarkit.scan import bookie_dir
from pulsarkit.scan.datadir import open_data_dir
from pulsarkit.scan.records import DataDirError
from pulsarkit.spark import storage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "interop" / "standalone"))
from test_datadir_oracle import oracle  # noqa: E402,F401  (the module-scoped fixture)

pytestmark = pytest.mark.spark

NOW_MS = 1_800_000_000_000
#: the fill level both sides plan for (measured, it would change as other processes write)
DISK = 0.42


def _ledger(store, custom: dict[str, str], entries: int = 3) -> int:
    h = LedgerHandle.create(store, {k: v.encode() for k, v in custom.items()}, "CRC32C")
    for i in range(entries):
        h.add_entry(pk.encode_entry(pk.message_metadata("p", i, 1_700_000_000_000 + i), b"y" * 200))
    h.close()
    return h.ledger_id


def _orphans(store) -> dict[str, int]:
    base = {"application": "pulsar", "component": "managed-ledger"}
    return {
        "no_owner": _ledger(store, base | {"pulsar/managed-ledger": "public/default/persistent/orders"}),
        "owner_gone": _ledger(store, base | {"pulsar/managed-ledger": "public/default/persistent/gone"}),
        "schema_of_deleted": _ledger(
            store, {"application": "pulsar", "component": "schema", "pulsar/schemaId": "public/default/dropped"}
        ),
        "on_disk_only": _ledger(store, base | {"pulsar/managed-ledger": "public/default/persistent/orders"}),
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> dict:
    """Three bookies (cookies) sharing one metadata store; orphans of four classes; a ledger deleted
    from metadata while on the bookies (``on_disk_only``), and one of the topic's ledgers deleted
    from metadata under its managed ledger."""
    root = tmp_path_factory.mktemp("storage")
    source = build_cluster_source(root, more=_orphans)
    dirs, _ = build_bookies(source, root / "cluster")
    made = source["more"]
    md = source["root"] / "src" / "metadata"
    deleted_topic_ledger = source["ledgers"][1]
    with MetadataStore(md) as ms:
        ms.delete_ledger_metadata(made["on_disk_only"])
        ms.delete_ledger_metadata(deleted_topic_ledger)
    for p in root.rglob("LOCK"):  # a directory pulsarkit did not create has none of our locks
        p.unlink()
    return {"metadata_dir": md, "dirs": dirs, "made": made, "deleted_topic_ledger": deleted_topic_ledger}


def _no_driver_log_reads(monkeypatch) -> list[int]:
    """Counts the entry logs the driver reads itself (Spark's Python workers are other processes)."""
    calls: list[int] = []
    real = bookie_dir.read_log

    def counted(reader, log_id):
        calls.append(log_id)
        return real(reader, log_id)

    monkeypatch.setattr(bookie_dir, "read_log", counted)
    return calls


def _same_data_dir(spark_dd, dd) -> None:
    assert spark_dd.entry_logs() == dd.entry_logs() and dd.entry_logs()
    assert spark_dd.issues == dd.issues
    assert spark_dd.ledgers_table().equals(dd.ledgers_table())


def _rows(df) -> list[dict]:
    return [r.asDict() for r in df.collect()]


def test_cluster_disk_usage_orphans_and_plan_are_the_single_process_ones(spark, cluster, monkeypatch):
    kw = {"metadata_dir": cluster["metadata_dir"], "ledger_dirs": cluster["dirs"]}
    before = {str(d): file_hashes(d) for d in cluster["dirs"]}
    with open_data_dir(**kw) as dd:
        assert dd.replicas is not None and [b.bookie_id for b in dd.replicas.bookies] == list(BOOKIE_IDS)
        want_du, want_orphans = disk_usage_table(dd), orphans_table(dd)
        want_plan = cleanup_plan(dd, include_review=True)
        driver_reads = _no_driver_log_reads(monkeypatch)
        with storage.open_data_dir(spark, **kw) as sdd:
            assert driver_reads == []  # every log was read by a task
            _same_data_dir(sdd, dd)
            assert _rows(storage.disk_usage(spark, sdd)) == want_du.to_pylist()
            assert _rows(storage.orphans(spark, sdd)) == want_orphans.to_pylist()
            assert storage.cleanup_plan(spark, sdd, include_review=True) == want_plan
        # the orphans made are found, and the deleted ledgers are dead bytes in the usage
        found = {r["category"]: r["ledger_id"] for r in want_orphans.to_pylist()}
        assert found == cluster["made"]
        dead = {r["ledger_id"] for r in want_du.to_pylist() if not r["live"]}
        assert dead == {cluster["made"]["on_disk_only"], cluster["deleted_topic_ledger"]}
        assert {i.kind for i in dd.issues} == {"missing_ledger"}
        # the same through each way of naming the bookies, and other thresholds
        mapping = {b: [d] for b, d in zip(BOOKIE_IDS, cluster["dirs"], strict=True)}
        got = storage.disk_usage(spark, metadata_dir=kw["metadata_dir"], bookies=mapping, minor_threshold=0.9,
                                 major_threshold=0.95)  # fmt: skip
        assert _rows(got) == disk_usage_table(dd, minor_threshold=0.9, major_threshold=0.95).to_pylist()
        assert driver_reads == []
    assert {str(d): file_hashes(d) for d in cluster["dirs"]} == before  # planning wrote nothing


def _single_gc_plans(metadata_dir, dirs, config, **kw) -> list[GcPlan]:
    """One GarbageCollector per directory, without the many-bookie driver: the reference."""
    plans = []
    with MetadataStore(metadata_dir, read_only=True) as ms:
        for d in dirs:
            s = SingleDirectoryDbLedgerStorage(str(d), read_only=True)
            try:
                plans.append(GarbageCollector(s, ms, config, clock_ms=lambda: NOW_MS).plan(GcRequest(**kw)))
            finally:
                s.close()
    return plans


@pytest.mark.parametrize(
    "config, flags, compacts",
    [
        (GcConfig(), {}, False),
        (GcConfig(), {"force": True}, False),  # each bookie's one log is still mostly live
        (GcConfig(minor_compaction_threshold=0.6, major_compaction_threshold=0.99), {"force": True}, True),
        (
            GcConfig(minor_compaction_threshold=0.98, major_compaction_threshold=0.99),
            {"force": True, "suspend_major": True},
            True,
        ),
    ],
)
def test_cluster_gc_plans_are_the_single_process_ones(spark, cluster, config, flags, compacts):
    md, dirs = cluster["metadata_dir"], cluster["dirs"]
    before = {str(d): file_hashes(d) for d in dirs}
    want = _single_gc_plans(md, dirs, config, disk_usage=DISK, **flags)
    request = GcRequest(disk_usage=DISK, **flags)
    got = storage.gc_plans(
        spark, metadata_dir=md, ledger_dirs=dirs, config=config, request=request, clock_ms=lambda: NOW_MS
    )
    assert got.bookies == want and got.created_ms == NOW_MS
    deleted = {cluster["made"]["on_disk_only"], cluster["deleted_topic_ledger"]}
    for plan in want:
        assert {d.ledger_id for d in plan.ledgers_to_delete} == deleted  # each bookie holds a copy of both
    assert all(bool(p.compaction.logs) == compacts for p in want)
    mapping = {b: [d] for b, d in zip(BOOKIE_IDS, dirs, strict=True)}
    by_mapping = storage.gc_plans(
        spark, metadata_dir=md, bookies=mapping, config=config, request=request, clock_ms=lambda: NOW_MS
    )
    assert by_mapping == got
    assert {str(d): file_hashes(d) for d in dirs} == before


def test_errors_are_the_single_process_ones(spark, tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(DataDirError) as single:
        open_data_dir(missing)
    with pytest.raises(DataDirError) as distributed:
        storage.disk_usage(spark, missing)
    assert str(distributed.value) == str(single.value)
    with pytest.raises(DataDirError, match="no such directory"):
        storage.gc_plans(spark, missing)
    with pytest.raises(DataDirError, match="needs a path"):
        storage.gc_plans(spark)


@pytest.mark.interop
@pytest.mark.parametrize("kind", ["clean", "killed"])
def test_real_standalone(spark, oracle, kind, monkeypatch, capsys):  # noqa: F811
    data = oracle / kind / "data"
    before = file_hashes(data)
    with open_data_dir(data) as dd:
        want_du, want_orphans, want_plan = disk_usage_table(dd), orphans_table(dd), cleanup_plan(dd)
        assert want_du.num_rows and want_orphans.num_rows  # a real standalone leaves deleted ledgers behind
        assert any(not m.from_index for _, _, m in dd.entry_logs())  # a log without ledgers map: scanned
        driver_reads = _no_driver_log_reads(monkeypatch)
        with storage.open_data_dir(spark, data) as sdd:
            _same_data_dir(sdd, dd)
        assert driver_reads == []
    assert _rows(storage.disk_usage(spark, data)) == want_du.to_pylist()
    assert _rows(storage.orphans(spark, data)) == want_orphans.to_pylist()
    assert storage.cleanup_plan(spark, data) == want_plan
    # GC plans: the plan ``pulsarkit gc --json`` prints, but for the clock
    got = storage.gc_plans(spark, data, request=GcRequest(force=True, disk_usage=DISK), clock_ms=lambda: NOW_MS)
    md_dir, bookies = bookie_dir.find_layout(data)
    assert got.bookies == _single_gc_plans(md_dir, bookies, GcConfig(), disk_usage=DISK, force=True)
    assert main(["gc", str(data), "--json", "--force", "--disk-usage", str(DISK)]) == 0
    cli = GcPlans.from_json(capsys.readouterr().out)
    assert [replace(p, created_ms=0) for p in got.bookies] == [replace(p, created_ms=0) for p in cli.bookies]
    assert file_hashes(data) == before  # planning wrote nothing
