"""BookKeeper's own garbage collector, run on another copy of the real standalone's directory, reclaims the
same ledgers as pulsarkit's (issue 13): the ledger sets, the entry logs and the bytes are compared.

Two copies of the cached Pulsar 4.0.7 standalone directory (``clean``, see ``test_datadir_oracle.py``):

* **A**: pulsarkit's GC (major threshold 0.99, forced, no throttle), with Pulsar's metadata store as its
  ledger manager, as ``test_pulsarkit_gc_on_a_copy_then_real_pulsar_reads_every_live_message`` runs it;
* **B**: BookKeeper's (the standalone's own jars, bookkeeper-server 4.17.2): ``bookie_gc_oracle/BookieGc.java``
  starts the bookie the way ``PulsarStandalone`` does (``BKCluster`` over ``rocksdb://<metadata dir>``, the
  standalone's conf, the cookie's address), only the GC settings changed the same way, triggers a forced GC
  through the bookie's admin API (``PUT /api/v1/bookie/gc``), waits for it and shuts the bookie down.

Then both copies must hold exactly the same live ledgers (the bookie's ledgers and location indexes, the entry
logs), no ledger the metadata store has deleted once the logs holding it are compacted, and every live entry
with the same bytes as before; the same logs are compacted. Where BookKeeper legitimately differs, the difference is
asserted exactly (see :func:`test_bookkeeper_gc_and_pulsarkit_gc_reclaim_the_same_ledgers`). The figures go to
``target/bookie-gc-comparison.json`` and a one-paragraph summary is printed (``-s``).
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from helpers import free_port
from pulsarkit.bookkeeper import EntryLogReader
from pulsarkit.bookkeeper.gc import GarbageCollector, GcConfig, GcPlan, GcRequest, GcResult
from pulsarkit.bookkeeper.ledger_storage import SingleDirectoryDbLedgerStorage
from pulsarkit.metadata import MetadataStore
from test_datadir_oracle import HERE as ORACLE_HERE
from test_datadir_oracle import JVM, PULSAR_VERSION, _copy, _lib, _tool, oracle  # noqa: F401

pytestmark = [pytest.mark.interop, pytest.mark.slow]

HERE = Path(__file__).resolve().parent / "bookie_gc_oracle"
REPO = Path(__file__).resolve().parents[3]
MAJOR_THRESHOLD = 0.99
#: Disk-pressure thresholds for both collectors (BKCluster's test values): a CI disk over 90 % full would
#: otherwise suspend major compaction on both sides and leave nothing to compare.
DISK_WARN, DISK_FULL = 0.99, 0.999
LOG_HEADER_SIZE = 1024
_KEY = struct.Struct(">qq")
_LOC = struct.Struct(">Q")


def _logs(current: Path) -> dict[int, int]:
    """Entry log id -> file size."""
    out = {}
    for p in current.glob("*.log"):
        try:
            out[int(p.stem, 16)] = p.stat().st_size
        except ValueError:
            continue
    return dict(sorted(out.items()))


def _state(ledger_dir: Path) -> dict[str, Any]:
    """What one bookie directory holds: its ``ledgers`` index (serialized LedgerData), its ``locations``
    index, every indexed entry's bytes, and the records of every entry log as BookKeeper's scanner sees
    them (pulsarkit's reader, read-only: nothing is written)."""
    current = ledger_dir / "current"
    s = SingleDirectoryDbLedgerStorage(str(ledger_dir), read_only=True)
    try:
        ledgers = {lid: ld.SerializeToString() for lid, ld in s.ledger_data.items() if ld.exists}
        locations = {}
        it = s.locations_db.iter()
        it.seek_to_first()
        while it.valid():
            locations[_KEY.unpack(bytes(it.key()))] = _LOC.unpack(bytes(it.value()))[0]
            it.next()
        entries = {(lid, eid): s.read_entry(lid, eid) for lid, eid in locations if lid in ledgers}
    finally:
        s.close()
    reader = EntryLogReader(current)
    records: dict[int, list[tuple[int, int, int, bytes]]] = {}
    headers = {}
    for log_id, size in _logs(current).items():
        records[log_id] = [(r.ledger_id, r.entry_id, r.offset, r.data) for r in reader.scan(log_id) if r.ledger_id >= 0]
        headers[log_id] = reader.header(log_id) if size >= LOG_HEADER_SIZE else None
    return {
        "logs": _logs(current),
        "ledgers": ledgers,
        "locations": locations,
        "entries": entries,
        "records": records,
        "headers": headers,
    }


def _in_logs(st: dict[str, Any]) -> set[int]:
    return {lid for recs in st["records"].values() for lid, *_ in recs}


def _record_bytes(st: dict[str, Any], log_id: int) -> tuple[int, int]:
    """(bytes of entry records, bytes of the ledgers map) of a log: the map starts at the header's offset."""
    size = st["logs"][log_id]
    h = st["headers"][log_id]
    end = h.ledgers_map_offset if h is not None and h.ledgers_map_offset else size
    return max(0, end - LOG_HEADER_SIZE), size - end


def _pulsarkit_gc(data: Path) -> tuple[GcPlan, GcResult]:
    storage = SingleDirectoryDbLedgerStorage(str(data / "bookkeeper"), read_only=False)
    metadata = MetadataStore(data / "metadata", read_only=True)
    try:
        config = GcConfig(
            major_compaction_threshold=MAJOR_THRESHOLD,
            compaction_rate_by_entries=0,
            disk_usage_warn_threshold=DISK_WARN,
            disk_usage_threshold=DISK_FULL,
        )
        gc = GarbageCollector(storage, metadata, config)
        plan = gc.plan(GcRequest(force=True))
        return plan, gc.execute(plan)
    finally:
        storage.close()
        metadata.close()


def _bookkeeper_gc(lib: Path, work: Path, source: Path) -> dict[str, Any]:
    """BookieGc.java on ``<work>/data`` (a fresh copy of ``source`` per attempt); BookKeeper's own account
    of the run, from its INFO log lines."""
    log = ""
    for attempt in range(3):
        shutil.rmtree(work / "data", ignore_errors=True)
        _copy(source, work / "data", drop_ephemeral=True)
        # the standalone's conf is the bookie's base configuration (BKCluster in 4.0.7), as in a real restart
        conf = (ORACLE_HERE / "standalone.conf").read_text() + (
            f"diskUsageWarnThreshold={DISK_WARN}\ndiskUsageThreshold={DISK_FULL}\n"
        )
        (work / "standalone.conf").write_text(conf)
        cmd = [
            _tool("java"),
            *JVM,
            f"-Dlog4j2.configurationFile={HERE / 'log4j2.xml'}",
            "-cp",
            f"{lib}/*",
            str(HERE / "BookieGc.java"),
            "standalone.conf",
            "data/metadata",
            "data/bookkeeper",
            str(free_port()),
            str(MAJOR_THRESHOLD),
        ]
        r = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=300)
        log = r.stdout + r.stderr
        (work / f"bookie-gc-{attempt}.log").write_text(log)
        if r.returncode == 0 and "GC-DONE" in r.stdout:
            break
        # the bookie binds the address its cookie records; a standalone restarted on another copy of the
        # same directory (another test, another session) may hold it for a while
        if "Address already in use" not in log or attempt == 2:
            raise RuntimeError(f"BookieGc failed (exit {r.returncode}): {log[-4000:]}")
        print(f"BookieGc: an address the bookie binds is in use; retrying in 15 s (attempt {attempt + 2} of 3)")
        time.sleep(15)
    ids = lambda pattern: sorted({int(m) for m in re.findall(pattern, log)})  # noqa: E731
    deleted = re.search(r"EntryLocationIndex Deleting indexes for ledgers: \[([0-9, ]*)\]", log)
    extracted = {
        int(m[0]): sorted(int(x) for x in m[1].split(",") if x.strip())
        for m in re.findall(r"Extracted entry log meta from entryLogId: (\d+), ledgers \[([0-9, ]*)\]", log)
    }
    status = re.search(r"^GC-STATUS (.*)$", log, re.M)
    buckets = re.findall(r"entry log usage buckets before compaction \[[^\]]*\] = (\[[0-9, ]*\])", log)
    return {
        "deleted_ledgers": sorted(int(x) for x in deleted[1].split(",") if x.strip()) if deleted else [],
        "removed_logs": ids(r"Deleting entryLogId (\d+) as it has no active ledgers"),
        "compacted_logs": ids(r"Removing entry log (\d+) after compaction"),
        "extracted": extracted,
        "usage_buckets_before": json.loads(buckets[-1]) if buckets else None,
        "gc_status": json.loads(status[1]) if status else None,
        "log": [
            line[4:]
            for line in log.splitlines()
            if line.startswith("LOG ") and ("GarbageCollectorThread" in line or "EntryLogCompactor" in line)
        ],
    }


def _name(log_id: int) -> str:
    return f"{log_id:x}.log"


def test_bookkeeper_gc_and_pulsarkit_gc_reclaim_the_same_ledgers(oracle, tmp_path):  # noqa: F811 - the fixture
    """The two collectors on two copies: the same ledgers deleted, kept and readable with the same bytes,
    the same logs compacted, and the same records (byte for byte) in what the compaction wrote.

    Where BookKeeper differs, and why (asserted exactly):

    * (both delete an empty, 0-byte preallocated entry log: ``extractMetaFromEntryLogs`` finds no ledger in
      it; this comparison is how pulsarkit learnt to do the same)
    * its bookie, once started, preallocates one more empty log (``EntryLoggerAllocator``), not GC's doing;
    * its ``EntryLogCompactor`` appends the live entries to the bookie's active log, which has no ledgers
      map when the bookie stops (the map is written when a log is rotated), while pulsarkit's transactional
      compactor seals its output with one: A is larger by exactly those maps and nothing else.
    """
    started = time.monotonic()
    lib = _lib()
    source = oracle / "clean" / "data"
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _copy(source, a / "data", drop_ephemeral=True)
    before = _state(a / "data" / "bookkeeper")
    metadata = MetadataStore(a / "data" / "metadata", read_only=True)
    try:
        known = set(metadata.ledger_ids())
    finally:
        metadata.close()
    on_bookie = set(before["ledgers"])  # the bookie's ledgers index (LedgerData.exists)
    indexed = {lid for lid, _ in before["locations"]}
    logged = _in_logs(before)
    existed = on_bookie | indexed | logged  # comparisons are restricted to these
    live, deleted = existed & known, existed - known
    assert deleted & logged and live & logged, "the workload deletes a topic and trims ledgers: garbage in the logs"
    live_keys = {k for k in before["locations"] if k[0] in live and k[0] in on_bookie}

    t0 = time.monotonic()
    plan_a, res_a = _pulsarkit_gc(a / "data")
    secs_a = time.monotonic() - t0
    assert res_a.skipped == [] and res_a.recovered == []
    t0 = time.monotonic()
    bk = _bookkeeper_gc(lib, b, source)
    secs_b = time.monotonic() - t0
    after_a = _state(a / "data" / "bookkeeper")
    after_b = _state(b / "data" / "bookkeeper")

    # --- ledgers: the same deleted, the same kept, in the index and in the entry logs -------------------
    assert sorted(res_a.deleted_ledgers) == bk["deleted_ledgers"] == sorted(on_bookie - known)
    for name, st in (("pulsarkit", after_a), ("bookkeeper", after_b)):
        assert set(st["ledgers"]) & existed == on_bookie & live, name  # the bookie's ledgers index
        assert {lid for lid, _ in st["locations"]} & existed == indexed & live, name  # the location index
    assert {k: v for k, v in after_a["ledgers"].items() if k in on_bookie} == {
        k: v for k, v in after_b["ledgers"].items() if k in on_bookie
    }  # LedgerData (exists, fenced, master key) unchanged and equal

    # --- what each log holds, as BookKeeper's metadata extraction (ledgers map or scan) found it --------
    for log_id, lids in bk["extracted"].items():
        assert set(lids) == {lid for lid, *_ in before["records"][log_id]}, _name(log_id)
    assert set(bk["extracted"]) == set(before["logs"])  # every log before was a flushed one
    # the usage buckets of pulsarkit's candidates are among BookKeeper's (which counts every log it holds)
    buckets_a = [0] * 10
    for c in plan_a.compaction.logs:
        buckets_a[c.bucket] += 1
    assert all(x <= y for x, y in zip(buckets_a, bk["usage_buckets_before"], strict=True))

    # --- entry logs: the same compacted, the same removed (the 0-byte preallocated log too) ---------------
    compacted_a = sorted(c.log_id for c in res_a.compacted_logs)
    assert compacted_a, "a log holding deleted ledgers is under the 0.99 threshold"
    assert compacted_a == bk["compacted_logs"]
    empty_before = {lid for lid, size in before["logs"].items() if size == 0}
    assert set(bk["removed_logs"]) == set(res_a.removed_logs) and empty_before <= set(res_a.removed_logs)
    gone_a = set(before["logs"]) - set(after_a["logs"])
    gone_b = set(before["logs"]) - set(after_b["logs"])
    assert gone_a == set(compacted_a) | set(res_a.removed_logs)
    assert gone_b == set(compacted_a) | set(bk["removed_logs"])
    untouched = set(before["logs"]) - gone_b
    assert {lid: after_a["logs"][lid] for lid in untouched} == {lid: before["logs"][lid] for lid in untouched}
    assert {lid: after_b["logs"][lid] for lid in untouched} == {lid: before["logs"][lid] for lid in untouched}
    # no ledger the metadata deleted is left in a log that was compacted: only untouched logs still hold some
    left = {lid for log in untouched for lid, *_ in before["records"].get(log, [])} & deleted
    assert _in_logs(after_a) & existed == (logged & live) | left
    assert _in_logs(after_b) & existed == (logged & live) | left
    new_a = sorted(set(after_a["logs"]) - set(before["logs"]))
    new_b = sorted(set(after_b["logs"]) - set(before["logs"]))
    assert new_a == sorted(c.into for c in res_a.compacted_logs if c.into is not None)
    written_b = [lid for lid in new_b if after_b["logs"][lid] > 0]
    preallocated_b = [lid for lid in new_b if after_b["logs"][lid] == 0]
    assert len(preallocated_b) == 1 and preallocated_b[0] == max(new_b)  # the bookie's next log

    # --- the records the two compactions wrote: the same, byte for byte -----------------------------------
    recs_a = [(lid, eid, data) for log in new_a for lid, eid, _, data in after_a["records"][log]]
    recs_b = [(lid, eid, data) for log in written_b for lid, eid, _, data in after_b["records"][log]]
    assert sorted(recs_a) == sorted(recs_b)
    assert {(lid, eid) for lid, eid, _ in recs_a} == {k for k in live_keys if before["locations"][k] >> 32 in gone_a}
    rec_bytes_a = sum(_record_bytes(after_a, log)[0] for log in new_a)
    map_bytes_a = sum(_record_bytes(after_a, log)[1] for log in new_a)
    rec_bytes_b = sum(_record_bytes(after_b, log)[0] for log in written_b)
    map_bytes_b = sum(_record_bytes(after_b, log)[1] for log in written_b)
    assert rec_bytes_a == rec_bytes_b == sum(4 + len(d) for *_, d in recs_a)
    assert all(after_a["headers"][log].ledgers_count > 0 for log in new_a)  # pulsarkit seals each output
    assert _record_bytes(after_b, max(written_b))[1] == 0  # BookKeeper's active log: no map yet
    if len(compacted_a) == 1 and len(new_a) == 1 and len(written_b) == 1:
        # one log compacted by each: the same records at the same offsets, so the same locations
        la, lb = new_a[0], written_b[0]
        assert [r[:3] for r in after_a["records"][la]] == [r[:3] for r in after_b["records"][lb]]
        offset = lambda loc: loc & 0xFFFFFFFF  # noqa: E731 - the position inside the log
        assert {k: offset(v) for k, v in after_a["locations"].items() if k in live_keys} == {
            k: offset(v) for k, v in after_b["locations"].items() if k in live_keys
        }
        raw_a = (a / "data" / "bookkeeper" / "current" / _name(la)).read_bytes()
        raw_b = (b / "data" / "bookkeeper" / "current" / _name(lb)).read_bytes()
        assert raw_a[LOG_HEADER_SIZE : len(raw_b)] == raw_b[LOG_HEADER_SIZE:]

    # --- every live entry: indexed and readable in both, with the bytes it had --------------------------
    keys_a = {k for k in after_a["locations"] if k[0] in existed}
    keys_b = {k for k in after_b["locations"] if k[0] in existed}
    assert keys_a == keys_b == live_keys
    for k in sorted(live_keys):
        assert after_a["entries"][k] == after_b["entries"][k] == before["entries"][k], k

    # --- bytes ----------------------------------------------------------------------------------------------
    bytes_before = sum(before["logs"].values())
    bytes_a = sum(after_a["logs"].values())
    bytes_b = sum(after_b["logs"].values())
    assert bytes_b < bytes_before and bytes_a < bytes_before
    assert bytes_a - bytes_b == map_bytes_a - map_bytes_b  # the ledgers maps; the 0-byte logs weigh nothing

    report = {
        "pulsar_version": PULSAR_VERSION,
        "bookkeeper_jar": sorted(p.name for p in lib.glob("bookkeeper-server-*.jar")),
        "major_compaction_threshold": MAJOR_THRESHOLD,
        "before": {
            "logs": {_name(k): v for k, v in before["logs"].items()},
            "log_bytes": bytes_before,
            "ledgers_on_bookie": sorted(on_bookie),
            "ledgers_indexed": sorted(indexed),
            "ledgers_in_logs": sorted(logged),
            "live_ledgers": sorted(live),
            "deleted_in_metadata": sorted(deleted),
            "live_entries": len(live_keys),
            "indexed_entries_of_deleted_ledgers": sum(1 for k in before["locations"] if k[0] in deleted),
        },
        "pulsarkit": {
            "seconds": round(secs_a, 2),
            "deleted_ledgers": sorted(res_a.deleted_ledgers),
            "removed_logs": [_name(x) for x in res_a.removed_logs],
            "usage_buckets_of_candidates": buckets_a,
            "compacted_logs": [
                {**asdict(c), "log_id": _name(c.log_id), "into": c.into and _name(c.into)} for c in res_a.compacted_logs
            ],
            "empty_logs_removed": [_name(x) for x in sorted(empty_before)],
            "new_logs": {_name(x): after_a["logs"][x] for x in new_a},
            "logs_after": {_name(k): v for k, v in after_a["logs"].items()},
            "log_bytes_after": bytes_a,
            "compacted_record_bytes": rec_bytes_a,
            "ledgers_map_bytes": map_bytes_a,
            "ledgers_indexed_after": sorted({lid for lid, _ in after_a["locations"]} & existed),
            "ledgers_in_logs_after": sorted(_in_logs(after_a) & existed),
        },
        "bookkeeper": {
            "seconds": round(secs_b, 2),
            "deleted_ledgers": bk["deleted_ledgers"],
            "removed_logs": [_name(x) for x in bk["removed_logs"]],
            "compacted_logs": [_name(x) for x in bk["compacted_logs"]],
            "extracted_ledgers": {_name(k): v for k, v in bk["extracted"].items()},
            "usage_buckets_before": bk["usage_buckets_before"],
            "preallocated_logs": [_name(x) for x in preallocated_b],
            "new_logs": {_name(x): after_b["logs"][x] for x in new_b},
            "logs_after": {_name(k): v for k, v in after_b["logs"].items()},
            "log_bytes_after": bytes_b,
            "compacted_record_bytes": rec_bytes_b,
            "ledgers_map_bytes": map_bytes_b,
            "ledgers_indexed_after": sorted({lid for lid, _ in after_b["locations"]} & existed),
            "ledgers_in_logs_after": sorted(_in_logs(after_b) & existed),
            "gc_status": bk["gc_status"],
            "log": bk["log"],
        },
        # written only once every assertion above held
        "asserted_equal": [
            "deleted ledgers",
            "live ledgers in the ledgers index, the location index and the entry logs",
            "compacted logs",
            "every live entry's bytes (A, B and before)",
            "the records the compactions wrote",
        ],
        "differences": {
            "bookkeeper_preallocated_logs": [_name(x) for x in preallocated_b],
            "log_bytes_a_minus_b": bytes_a - bytes_b,
            "explained_by_ledgers_maps_a_minus_b": map_bytes_a - map_bytes_b,
        },
    }
    out = REPO / "target" / "bookie-gc-comparison.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    print(
        f"\nBookie GC, pulsarkit vs BookKeeper {report['bookkeeper_jar']} (Pulsar {PULSAR_VERSION} standalone, "
        f"clean copy, major threshold {MAJOR_THRESHOLD}, forced): before, {len(before['logs'])} entry logs "
        f"({', '.join(f'{_name(k)} {v} B' for k, v in before['logs'].items())}; {bytes_before} B) held "
        f"{len(existed)} ledgers, {len(deleted)} of them deleted in the metadata store "
        f"({sum(1 for k in before['locations'] if k[0] in deleted)} indexed entries) and {len(live)} live "
        f"({len(live_keys)} entries). Both deleted the same {len(deleted)} ledgers, compacted the same logs "
        f"({', '.join(_name(x) for x in compacted_a)}), kept exactly the {len(live)} live ledgers in the index "
        f"and the logs, and every live entry reads back with its original bytes in both copies. pulsarkit: "
        f"{bytes_before} -> {bytes_a} B (into {', '.join(_name(x) for x in new_a)}, {rec_bytes_a} B of records "
        f"+ {map_bytes_a} B ledgers map; {len(empty_before)} empty log(s) removed) in {secs_a:.1f} s; BookKeeper: "
        f"{bytes_before} -> {bytes_b} B (into the bookie's active log {', '.join(_name(x) for x in written_b)}, "
        f"{rec_bytes_b} B of the same records, no map; the same empty log(s) "
        f"{', '.join(_name(x) for x in sorted(empty_before)) or 'none'} deleted; "
        f"{', '.join(_name(x) for x in preallocated_b)} preallocated) in {secs_b:.1f} s including the bookie's "
        f"start and stop. Difference A - B = {bytes_a - bytes_b} B = the ledgers maps ({map_bytes_a} B in A, "
        f"{map_bytes_b} B in B). "
        f"Test wall time {time.monotonic() - started:.1f} s; figures in {out.relative_to(REPO)}."
    )
