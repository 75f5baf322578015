"""Orphan ledgers and where every byte of the entry logs goes, from one snapshot of a data directory.

:func:`find_orphans` joins every ledger the metadata store knows (with its custom metadata: component,
managed ledger, cursor, schema id, compacted topic), every ledger something still refers to (a managed
ledger's ledger list, a cursor, a schema locator, a topic's ``__compaction`` cursor) and every ledger
the bookies hold, and classes what nothing owns:

========================= ============================================================ ===========
class                     meaning                                                      verdict
========================= ============================================================ ===========
``no_owner``              its managed ledger exists but does not list it (Pulsar        review
                          #13238: metadata kept after a failed delete, or a ledger
                          still being created when the snapshot was taken); a
                          cursor ledger its subscription no longer uses: safe, but
                          review when OPEN and newer than the one it uses (the
                          cursor switching to it)
``owner_gone``            the managed ledger its metadata names no longer exists        safe
``deleted_subscription``  a cursor ledger of a subscription its topic no longer has     safe
``schema_of_deleted``     a schema ledger whose ``/schemas`` node is gone              safe
``schema_unreferenced``   a schema ledger its topic's schema locator does not list      review
``old_compacted``         a compacted ledger that is not its topic's current one        safe
                          (review when OPEN and newer than it: a compaction still
                          writing it)
``unknown_owner``         metadata without any custom metadata saying whose it is       review
``on_disk_only``          entries on a bookie, no metadata (the bookie's GC deletes     safe
                          its index entries and reclaims the bytes by compaction)
``missing``               referenced, but neither metadata nor data (data loss, not     inconsistent
                          an orphan; nothing to clean)
``data_missing``          metadata says it holds entries, but no given bookie holds     inconsistent
                          any (data loss, or bookies of its ensembles not given: the
                          evidence names them; never cleaned)
========================= ============================================================ ===========

``safe`` means nothing in this snapshot refers to the ledger; ``review`` means a person should look
(a live broker may be mid-operation). A ``safe`` class becomes ``review`` when the managed ledger or
cursor it says is gone still has a node (or nodes under it) that this reader did not read as one.
:func:`cleanup_plan` turns the findings into a reviewable :class:`OrphanCleanupPlan` (:mod:`pulsarkit.plan`;
its dry run is the plan alone), pinning each ledger's metadata version; this module never deletes anything
(:mod:`pulsarkit.analysis.orphan_cleanup` executes a plan).

:func:`disk_usage` attributes the bytes of each entry log to ledgers and owners, live or dead, and
says why dead bytes are still on disk (a log is only reclaimed when compaction rewrites it).
"""

from __future__ import annotations

import os
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import pyarrow as pa

from ..bookkeeper.gc import GcConfig, reclaiming_level
from ..broker.topic_name import COMPACTED_LEDGER_PROPERTY, COMPACTION_CURSOR, encode_local, topic_to_ml
from ..codec.protobuf_wire import fields
from ..errors import InvalidTopicNameError
from ..metadata.store import ledger_path
from ..plan import Plan, PlanItem
from ..scan.datadir import DataDir
from ..scan.records import Ledger

#: GC's defaults, Pulsar's conf/bookkeeper.conf (BookKeeper's own major default is 0.8).
MINOR_COMPACTION_THRESHOLD = GcConfig.minor_compaction_threshold
MAJOR_COMPACTION_THRESHOLD = GcConfig.major_compaction_threshold
ML_ROOT = "/managed-ledgers/"


@dataclass(frozen=True)
class OrphanFinding:
    ledger_id: int
    category: str
    verdict: str
    kind: str
    owner: str | None
    evidence: str
    #: The ledger's state (OPEN, CLOSED, ...; DELETED: no metadata).
    state: str
    entries: int
    #: Distinct entries some given bookie holds (an open ledger's may lie past a gap, beyond ``entries``).
    entries_on_bookie: int
    bytes_on_bookie: int


def _schema_ledgers(locator: bytes) -> set[int]:
    """Ledger ids a ``SchemaLocator`` (``info`` and ``index``: IndexEntry{position{ledgerId}}) refers to."""
    out: set[int] = set()
    try:
        for f, entry in fields(locator):
            if f not in (1, 2):
                continue
            for f2, pos in fields(bytes(entry)):
                if f2 == 2:
                    for f3, v in fields(bytes(pos)):
                        if f3 == 1:
                            out.add(int(v))
    except Exception:  # noqa: BLE001 - a damaged locator refers to nothing we can trust
        return set()
    return out


def _current_compacted(dd: DataDir) -> dict[int, str]:
    out: dict[int, str] = {}
    for ml in dd.managed_ledger_names():
        for c in dd.cursors(ml):
            if c.name == COMPACTION_CURSOR and COMPACTED_LEDGER_PROPERTY in c.properties:
                out[int(c.properties[COMPACTED_LEDGER_PROPERTY])] = ml
    return out


def find_orphans(dd: DataDir) -> list[OrphanFinding]:
    """Every ledger nothing owns, with evidence and a verdict (see the module docstring)."""
    refs = _References.of(dd)
    tree = _ml_tree(dd)
    out: list[OrphanFinding] = []
    for _, led in sorted(dd.ledgers.items()):
        found = _owner_still_stored(dd, tree, led, _classify(dd, refs, led)) or _data_missing(dd, led)
        if found is not None:
            category, verdict, owner, evidence = found
            out.append(
                OrphanFinding(
                    ledger_id=led.ledger_id,
                    category=category,
                    verdict=verdict,
                    kind=led.kind,
                    owner=owner,
                    evidence=evidence,
                    state=led.state,
                    entries=led.entries,
                    entries_on_bookie=led.entries_on_bookie,
                    bytes_on_bookie=led.bytes_on_bookie,
                )
            )
    return out


@dataclass(frozen=True)
class _References:
    """What refers to ledgers in one snapshot: the managed ledgers' lists, the cursors, the topics'
    compacted ledgers, the schema locators."""

    listed: set[int]
    cursor_ledgers: set[int]
    compacted: dict[int, str]
    schema_refs: dict[str, set[int]]
    max_listed: dict[str, int]
    #: Each managed ledger's current compacted ledger (the newest, if several cursors name one).
    max_compacted: dict[str, int]

    @classmethod
    def of(cls, dd: DataDir) -> _References:
        compacted = _current_compacted(dd)
        max_compacted: dict[str, int] = {}
        for lid, ml in compacted.items():
            max_compacted[ml] = max(max_compacted.get(ml, -1), lid)
        return cls(
            listed={li.ledgerId for info in dd.ml_infos.values() for li in info.ledgerInfo},
            cursor_ledgers={
                ci.cursorsLedgerId
                for curs in dd.cursor_infos.values()
                for ci in curs.values()
                if ci.cursorsLedgerId >= 0
            },
            compacted=compacted,
            schema_refs={sid: _schema_ledgers(loc) for sid, loc in dd.schemas.items()},
            max_listed={
                ml: max((li.ledgerId for li in info.ledgerInfo), default=-1) for ml, info in dd.ml_infos.items()
            },
            max_compacted=max_compacted,
        )


def _in_flight(led: Ledger, referenced: int) -> bool:
    """An unreferenced ledger that is OPEN and newer than the one its owner refers to (-1: none yet): Pulsar
    creates and writes a replacement before it switches the reference to it (a managed ledger's next
    ledger, a cursor's createNewMetadataLedger, a compaction's phase two), so a live broker may be mid-way."""
    return led.state == "OPEN" and led.ledger_id > referenced


def _compacted_ml(topic: str) -> str | None:
    """The managed ledger of a compacted ledger's ``pulsar/compactedTopic``; None when it names none."""
    try:
        return topic_to_ml(topic) if topic else None
    except InvalidTopicNameError:  # not a topic name: no managed ledger to compare with
        return None


def _ml_tree(dd: DataDir) -> set[str]:
    """Every node under ``/managed-ledgers/`` and every parent of one, read or not as a managed ledger."""
    out: set[str] = set()
    for path in dd.nodes:
        if path.startswith(ML_ROOT):
            out.update(path[:i] for i, c in enumerate(path) if c == "/" and i > len(ML_ROOT))
            out.add(path)
    return out


def _owner_still_stored(
    dd: DataDir, tree: set[str], led: Ledger, found: tuple[str, str, str | None, str] | None
) -> tuple[str, str, str | None, str] | None:
    """A ``safe`` finding turned ``review`` when the owner it says is gone still has a node (or nodes
    under it) in the metadata tree: a name this reader did not take for a topic's (a shape it does not
    know, a value it could not parse) must never make live ledgers look deletable."""
    if found is None or found[1] != "safe":
        return found
    category, _, owner, evidence = found
    cm = led.custom_metadata
    ml = led.managed_ledger
    if led.kind == "compacted":
        ml = _compacted_ml(cm.get("pulsar/compactedTopic", b"").decode("utf-8", "replace"))
    stored = []
    if ml and ml not in dd.ml_infos and ML_ROOT + ml in tree:
        stored.append(ML_ROOT + ml)
    cursor = (cm.get("pulsar/cursor") or cm.get("psr/cursor") or b"").decode("utf-8", "replace")
    if led.kind == "cursor" and ml and cursor and ml in dd.ml_infos:
        names = {c.name for c in dd.cursors(ml)}
        for node in {f"{ML_ROOT}{ml}/{cursor}", f"{ML_ROOT}{ml}/{encode_local(cursor)}"}:
            if node in tree and urllib.parse.unquote_plus(node.rpartition("/")[2]) not in names:
                stored.append(node)
    if not stored:
        return found
    why = f"{evidence}; but the metadata still holds {', '.join(sorted(stored))} (or nodes under it), unread"
    return category, "review", owner, why


def _data_missing(dd: DataDir, led: Ledger) -> tuple[str, str, str | None, str] | None:
    """The seed's "missing ledgers": metadata claiming entries that no copy holds on any bookie given."""
    md = dd.ledger_metadata.get(led.ledger_id)
    if md is None or led.last_entry_id < 0 or led.entries_on_bookie > 0:
        return None
    ensemble = sorted({b for seg in md.segment for b in seg.ensembleMember})
    given = {b for b in dd.bookie_ids if b}
    absent = [b for b in ensemble if b not in given] if given else []
    why = f"metadata claims {led.entries} entries on {', '.join(ensemble) or 'no bookie'}; no given bookie holds any"
    if absent:
        why += f" (not given: {', '.join(absent)})"
    return "data_missing", "inconsistent", led.managed_ledger or led.topic, why


def _classify(dd: DataDir, refs: _References, led: Ledger) -> tuple[str, str, str | None, str] | None:
    """``(category, verdict, owner, evidence)`` of a ledger nothing owns; None for an owned one."""
    lid, cm, ml = led.ledger_id, led.custom_metadata, led.managed_ledger
    if led.state == "DELETED":
        if led.referenced or lid in refs.listed or lid in refs.cursor_ledgers:
            if led.entries_on_bookie == 0:
                why = f"listed by {ml or 'a cursor'}, but no metadata and no entries"
                return "missing", "inconsistent", ml, why
        elif led.entries_on_bookie:
            held = f" (held {led.deleted_guess} data)" if led.deleted_guess else ""
            return (
                "on_disk_only",
                "safe",
                None,
                f"{led.entries_on_bookie} entries on the bookie, no ledger metadata{held}",
            )
        return None
    if led.kind == "compacted":
        topic = cm.get("pulsar/compactedTopic", b"").decode("utf-8", "replace")
        if lid in refs.compacted:
            return None
        elsewhere = f" ({topic} compacts into another ledger)" if topic else ""
        why = f"no topic's __compaction cursor names it{elsewhere}"
        cml = _compacted_ml(topic)
        if cml in dd.ml_infos and _in_flight(led, refs.max_compacted.get(cml, -1)):
            why += "; it is OPEN and newer than the topic's current one: possibly a compaction still writing it"
            return "old_compacted", "review", topic, why
        return "old_compacted", "safe", topic or None, why
    if led.kind == "schema":
        sid = cm.get("pulsar/schemaId", b"").decode("utf-8", "replace")
        if sid not in refs.schema_refs:
            return (
                "schema_of_deleted",
                "safe",
                sid or None,
                (f"no /schemas/{sid} node" if sid else "no pulsar/schemaId in its metadata"),
            )
        if lid not in refs.schema_refs[sid]:
            why = f"/schemas/{sid} lists ledgers {sorted(refs.schema_refs[sid])}, not this one"
            return "schema_unreferenced", "review", sid, why
        return None
    if led.kind == "cursor":
        if lid in refs.cursor_ledgers:
            return None
        cursor = cm.get("pulsar/cursor", b"").decode("utf-8", "replace") or led.cursor
        if ml not in dd.ml_infos:
            return "owner_gone", "safe", ml, f"cursor {cursor!r} of managed ledger {ml!r}, which no longer exists"
        current = {c.name: c.cursor_ledger_id for c in dd.cursors(ml)}
        if cursor not in current:
            return "deleted_subscription", "safe", ml, f"{ml} has no subscription {cursor!r} any more"
        why = f"subscription {cursor!r} exists but its cursor uses another ledger"
        if _in_flight(led, current[cursor]):
            return "no_owner", "review", ml, why + "; it is OPEN and newer than that one: possibly its replacement"
        return "no_owner", "safe", ml, why
    if ml is None:
        if not cm:
            return (
                "unknown_owner",
                "review",
                None,
                "ledger metadata without custom metadata: not created by a Pulsar broker",
            )
        return None
    if lid in refs.listed:
        return None
    if ml not in dd.ml_infos:
        return "owner_gone", "safe", ml, f"managed ledger {ml!r} named by its metadata no longer exists"
    newest = _in_flight(led, refs.max_listed.get(ml, -1))
    why = (
        "; it is OPEN and newer than all of them: possibly a ledger being created"
        if newest
        else "; left behind (Pulsar #13238: metadata kept after its delete failed)"
    )
    return "no_owner", "review", ml, f"{ml} lists {len(dd.ml_ledgers(ml))} ledgers, not this one{why}"


ORPHANS_SCHEMA = pa.schema(
    [
        ("ledger_id", pa.int64()),
        ("category", pa.string()),
        ("verdict", pa.string()),
        ("kind", pa.string()),
        ("owner", pa.string()),
        ("evidence", pa.string()),
        ("state", pa.string()),
        ("entries", pa.int64()),
        ("entries_on_bookie", pa.int64()),
        ("bytes_on_bookie", pa.int64()),
    ]
)


def orphans_table(dd: DataDir) -> Any:
    return pa.Table.from_pylist([asdict(f) for f in find_orphans(dd)], schema=ORPHANS_SCHEMA)


#: What a plan item does when it deletes something (the others need nothing: the bookies' GC reclaims them).
DELETE_METADATA = "delete ledger metadata (the bookies then reclaim the entries)"


@dataclass(frozen=True)
class OrphanCleanupItem(OrphanFinding, PlanItem):
    """One orphan in a cleanup plan: its finding, what is done about it, and its metadata node's
    version and creation time pinned."""

    action: str
    metadata_version: int
    metadata_ctime: int
    reason: str

    @property
    def deletes_metadata(self) -> bool:
        return self.action == DELETE_METADATA


@dataclass(frozen=True)
class OrphanCleanupPlan(Plan):
    """A reviewable orphan cleanup: the ledgers whose deletion is safe by one snapshot, and the
    directories an executor re-reads to re-check them (:mod:`pulsarkit.analysis.orphan_cleanup`)."""

    KIND: ClassVar[str] = "orphan-ledger-cleanup"

    metadata_dir: str
    ledger_dirs: list[str]
    journal_dirs: list[str]
    index_dirs: list[str]
    items: list[OrphanCleanupItem]
    #: When the plan was made (ms); not part of what it does, so not compared.
    created_ms: int = field(default=0, compare=False)
    #: The snapshot's size: ledgers in the metadata store, managed ledgers.
    state: dict[str, int] = field(default_factory=dict)

    @property
    def to_delete(self) -> list[OrphanCleanupItem]:
        """The items whose metadata :func:`~pulsarkit.analysis.orphan_cleanup.execute` deletes."""
        return [i for i in self.items if i.deletes_metadata]

    @property
    def bytes(self) -> int:
        return sum(i.bytes_on_bookie for i in self.items)


def cleanup_plan(dd: DataDir, include_review: bool = False, now_ms: int | None = None) -> OrphanCleanupPlan:
    """A reviewable plan: the ledgers whose deletion is safe by this snapshot (with ``include_review``
    the ``review`` ones too), each with its reason and bytes, and the facts an executor must re-check
    before deleting. A dry run is this plan alone."""
    items = []
    for f in find_orphans(dd):
        if f.verdict == "safe" or (include_review and f.verdict == "review"):
            if f.category == "on_disk_only":
                action = "none: the bookie's GC reclaims it (no metadata to delete)"
            else:
                action = DELETE_METADATA
            path = dd.ledger_paths.get(f.ledger_id, ledger_path(f.ledger_id))
            version, ctime = dd.node_versions.get(path, (-1, -1))
            items.append(
                OrphanCleanupItem(
                    **asdict(f),
                    action=action,
                    metadata_version=version,
                    metadata_ctime=ctime,
                    reason=f"{f.category} ({f.verdict}): {f.evidence}",
                )
            )
    # Absolute paths: a plan executed from another working directory must re-read the same store.
    return OrphanCleanupPlan(
        metadata_dir=os.path.abspath(dd.metadata_dir),
        ledger_dirs=[os.path.abspath(d) for d in dd.ledger_dirs],
        journal_dirs=[os.path.abspath(d) for d in dd.journal_dirs],
        index_dirs=[os.path.abspath(d) for d in dd.index_dirs],
        items=items,
        created_ms=int(time.time() * 1000) if now_ms is None else now_ms,
        state={"ledgers_in_metadata": len(dd.ledger_metadata), "managed_ledgers": len(dd.ml_infos)},
    )


# ------------------------------------------------------------------------------------ disk usage


def _owner_of(dd: DataDir, lid: int, orphan: dict[int, OrphanFinding]) -> tuple[str, str | None]:
    led = dd.ledgers.get(lid)
    if led is None or led.state == "DELETED":
        return "deleted", led.deleted_guess if led is not None else None
    if lid in orphan:
        return "orphan", orphan[lid].owner
    if led.kind == "topic":
        return "topic", led.topic
    if led.kind in ("transaction_log", "pending_ack"):
        return "transactions", led.topic
    if led.kind == "schema":
        return "schema", led.custom_metadata.get("pulsar/schemaId", b"").decode("utf-8", "replace") or None
    return led.kind, led.topic or led.managed_ledger


def disk_usage_rows(
    dd: DataDir,
    minor_threshold: float = MINOR_COMPACTION_THRESHOLD,
    major_threshold: float = MAJOR_COMPACTION_THRESHOLD,
) -> Iterator[dict[str, Any]]:
    """One row per (entry log, ledger): bytes, live or dead, owner class, and for dead bytes why they
    are still there."""
    orphan = {f.ledger_id: f for f in find_orphans(dd)}
    for path, log_id, md in dd.entry_logs():
        live_bytes = sum(size for lid, size in md.ledgers.items() if _live(dd, lid))
        usage = live_bytes / md.total_size if md.total_size else 0.0
        for lid, size in sorted(md.ledgers.items()):
            live = _live(dd, lid)
            owner_class, owner = _owner_of(dd, lid, orphan)
            level = reclaiming_level(usage, minor_threshold, major_threshold)
            if live:
                reason = "orphan: nothing refers to it (see pulsarkit orphans)" if lid in orphan else "live"
            elif level is None:
                reason = (
                    f"deleted ledger in a log still {usage:.0%} live: at or above the major compaction "
                    f"threshold {major_threshold:.0%}, so no compaction rewrites it"
                )
            elif level == "major":
                reason = (
                    f"deleted ledger in a log {usage:.0%} live: only the next major compaction "
                    f"(threshold {major_threshold:.0%}) rewrites it"
                )
            else:
                reason = f"deleted ledger in a log {usage:.0%} live: the next minor compaction reclaims it"
            yield {
                "entry_log": path,
                "log_id": log_id,
                "log_total_size": md.total_size,
                "log_usage": round(usage, 4),
                "ledger_id": lid,
                "bytes": size,
                "live": live,
                "owner_class": owner_class,
                "owner": owner,
                "reason": reason,
            }


def _live(dd: DataDir, lid: int) -> bool:
    led = dd.ledgers.get(lid)
    return led is not None and led.state != "DELETED"


DISK_USAGE_SCHEMA = pa.schema(
    [
        ("entry_log", pa.string()),
        ("log_id", pa.int64()),
        ("log_total_size", pa.int64()),
        ("log_usage", pa.float64()),
        ("ledger_id", pa.int64()),
        ("bytes", pa.int64()),
        ("live", pa.bool_()),
        ("owner_class", pa.string()),
        ("owner", pa.string()),
        ("reason", pa.string()),
    ]
)


def disk_usage_table(dd: DataDir, **thresholds: float) -> Any:
    return pa.Table.from_pylist(list(disk_usage_rows(dd, **thresholds)), schema=DISK_USAGE_SCHEMA)


__all__ = [
    "DISK_USAGE_SCHEMA",
    "MAJOR_COMPACTION_THRESHOLD",
    "MINOR_COMPACTION_THRESHOLD",
    "ORPHANS_SCHEMA",
    "DELETE_METADATA",
    "OrphanCleanupItem",
    "OrphanCleanupPlan",
    "OrphanFinding",
    "cleanup_plan",
    "disk_usage_rows",
    "disk_usage_table",
    "find_orphans",
    "orphans_table",
]
