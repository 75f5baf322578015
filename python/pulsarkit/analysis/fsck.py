"""``pulsarkit fsck``: every entry log of a data directory checked — header, ledgers map, record
framing, each entry's digest — and cross-checked against the bookie's location index and the journal;
then the metadata against the bookies: a closed ledger whose metadata claims entries no given bookie
holds (``ledger_data_missing``: none of them; ``ledger_entries_missing``: some, counted), and a ledger
a managed ledger lists that has no metadata (``missing_ledger``), as ``messages`` reports them.
Read-only; one finding per problem, machine-readable.

Severities: ``error`` is data a reader can trip on (a corrupt or torn record, a digest mismatch, an
index entry pointing at nothing); ``warning`` is something BookKeeper works around (a missing or
inconsistent ledgers map, rebuilt by a scan: the BK #4607 class; a record of a live ledger the index
does not name, which bookie recovery re-indexes); ``info`` is expected state (a log's zeroed
preallocated tail, entries only in the journal, records of deleted ledgers awaiting GC).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..bookkeeper import scan_entry_logs
from ..scan.bookie_dir import entry_payload
from ..scan.datadir import DataDir
from ..scan.records import DataDirError


def _finding(check: str, severity: str, message: str, **where: Any) -> dict[str, Any]:
    return {
        "check": check,
        "severity": severity,
        "path": where.get("path"),
        "offset": where.get("offset"),
        "ledger_id": where.get("ledger_id"),
        "entry_id": where.get("entry_id"),
        "message": message,
    }


def fsck(dd: DataDir) -> Iterator[dict[str, Any]]:
    """Findings, log by log, then the index and journal cross-checks."""
    live = {lid for lid, led in dd.ledgers.items() if led.state != "DELETED"}
    seen: dict[tuple[str, int], tuple[int, int]] = {}  # (current dir, location) -> (ledger, entry)
    for current in dd.bookie_current_dirs():
        logs = [(path, log_id, md) for path, log_id, md in dd.entry_logs() if path.startswith(current)]
        newest = max((log_id for _, log_id, _ in logs), default=None)
        for path, log_id, md in logs:
            if getattr(md, "fallback_reason", None):
                # The log being written has no map until it is rotated; an older one should have one.
                sev = "info" if log_id == newest else "warning"
                yield _finding("ledgers_map", sev, f"ledgers map not used: {md.fallback_reason}", path=path)
        for batch in scan_entry_logs([current], "AUTO", include_issues=True, payload_type="binary_view"):
            cols = batch.select(
                ["log_id", "offset", "location", "ledger_id", "entry_id", "digest_ok", "issue", "error"]
            ).to_pylist()
            for r in cols:
                path = str(Path(current) / f"{r['log_id']:x}.log") if r["log_id"] is not None else current
                if r["issue"] is not None:
                    empty = Path(path).is_file() and Path(path).stat().st_size == 0
                    sev = "info" if r["issue"] == "zero_tail" or empty else "error"  # empty: the preallocated next log
                    yield _finding(r["issue"], sev, r["error"] or r["issue"], path=path, offset=r["offset"])
                    continue
                if r["ledger_id"] is None or r["ledger_id"] < 0:
                    continue  # the ledgers map's own records
                seen[(current, r["location"])] = (r["ledger_id"], r["entry_id"])
                if r["digest_ok"] is False:
                    sev = "error" if r["ledger_id"] in live else "info"
                    yield _finding(
                        "digest",
                        sev,
                        "stored digest does not verify (CRC32C, CRC32 or MAC with an empty password)",
                        path=path,
                        offset=r["offset"],
                        ledger_id=r["ledger_id"],
                        entry_id=r["entry_id"],
                    )
    indexed: set[tuple[str, int, int]] = set()
    for current, lid, eid, loc in dd.entry_locations():
        indexed.add((current, lid, eid))
        rec = seen.get((current, loc))
        if rec != (lid, eid):
            sev = "error" if lid in live else "info"
            what = "no record there" if rec is None else f"the record there is ledger {rec[0]} entry {rec[1]}"
            yield _finding(
                "dangling_location",
                sev,
                f"the index puts ledger {lid} entry {eid} at log {loc >> 32:x} offset {(loc & 0xFFFFFFFF) - 4}: {what}",
                path=str(Path(current) / f"{loc >> 32:x}.log"),
                offset=(loc & 0xFFFFFFFF) - 4,
                ledger_id=lid,
                entry_id=eid,
            )
    for (current, _loc), (lid, eid) in seen.items():
        if lid in live and (current, lid, eid) not in indexed:
            yield _finding(
                "unindexed_record",
                "warning",
                "a record of a live ledger that the location index does not name (bookie recovery re-indexes it)",
                path=current,
                ledger_id=lid,
                entry_id=eid,
            )
    on_bookie = {(lid, eid) for _current, lid, eid in indexed}
    for lid, entries in dd.journal.items():
        led = dd.ledgers.get(lid)
        if led is not None and led.journal_only_entries:
            yield _finding(
                "journal_only",
                "info",
                f"{led.journal_only_entries} entries only in the journal (bookie recovery replays them)",
                ledger_id=lid,
            )
        # Entries only the journal holds are read from it (as bookie recovery replays them), so their
        # digests are checked like the entry logs' records.
        digest = led.digest_type if led is not None and led.digest_type else None
        password = led.password if led is not None else b""
        for eid in sorted(entries):
            if (lid, eid) in on_bookie:
                continue
            jr = entries[eid]
            try:
                entry_payload(jr.data, digest, password, lid, eid, jr.path, jr.offset)
            except DataDirError as e:
                yield _finding(
                    "journal_digest",
                    "error" if lid in live else "info",
                    f"an entry only the journal holds does not verify: {e.reason or e}",
                    path=jr.path,
                    offset=jr.offset,
                    ledger_id=lid,
                    entry_id=eid,
                )

    yield from _metadata_against_bookies(dd)


def _metadata_against_bookies(dd: DataDir) -> Iterator[dict[str, Any]]:
    """What the metadata claims that the bookies do not hold (one finding per ledger, however many
    entries it claims: a forged ``lastEntryId`` is one finding with its count)."""
    for lid, led in sorted(dd.ledgers.items()):
        if led.state != "CLOSED" or led.metadata_last_entry_id is None:
            continue  # an open ledger is recovered up to what the bookies hold; a deleted one claims nothing
        claimed, held = led.entries, min(led.entries_on_bookie, led.entries)
        if held >= claimed:
            continue
        owner = led.managed_ledger or "no managed ledger"
        what = f"{owner}, {led.kind}" if led.managed_ledger else owner
        yield _finding(
            "ledger_data_missing" if held == 0 else "ledger_entries_missing",
            "error" if led.managed_ledger else "warning",  # an unowned ledger's loss costs no reader anything
            f"ledger {lid} ({what}) has metadata claiming {claimed} entries (0..{led.last_entry_id}) but the "
            f"given bookies hold {held} of them: {claimed - held} missing",
            path=str(dd.metadata_dir),
            ledger_id=lid,
        )
    for issue in dd.issues:
        if issue.kind == "missing_ledger":
            yield _finding(issue.kind, "error", issue.message, path=issue.path, ledger_id=issue.ledger_id)


FSCK_SCHEMA = pa.schema(
    [
        ("check", pa.string()),
        ("severity", pa.string()),
        ("path", pa.string()),
        ("offset", pa.int64()),
        ("ledger_id", pa.int64()),
        ("entry_id", pa.int64()),
        ("message", pa.string()),
    ]
)


def fsck_table(dd: DataDir) -> Any:
    return pa.Table.from_pylist(list(fsck(dd)), schema=FSCK_SCHEMA)


__all__ = ["FSCK_SCHEMA", "fsck", "fsck_table"]
