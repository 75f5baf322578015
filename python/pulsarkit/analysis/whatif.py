"""What-if: the disk a data directory will free, and when, under given retention, TTL and GC settings.

:func:`simulate` replays, from one snapshot, what the broker and the bookies would do over a horizon:

* every retention check (``retentionCheckIntervalInSeconds``), each managed ledger deletes the ledgers
  :func:`pulsarkit.managed_ledger.trim.retention_candidates` picks (the broker's own rule). TTL first
  moves each cursor past every ledger closed more than ``ttl_seconds`` ago; this is ledger-granular,
  so it never expires a ledger before the broker would;
* every ``gcWaitTime`` each bookie removes the entry logs left with no live ledger, and when a
  compaction interval has passed, rewrites the logs under that level's threshold (major wins), with
  GC's own rules (:mod:`pulsarkit.bookkeeper.gc`'s ``compaction_level``, ``log_usage`` and
  ``select_for_compaction``: lowest usage bucket first, then by log id): the dead bytes are reclaimed
  and the live ones written again, into a log that is then fully live.

The result is a timeline (one row per event, with the bytes on each bookie after it) and a summary.
Topics a broker never loads are never trimmed (Pulsar #9057); ``assume_loaded=False`` models that
for topics with no active producer or consumer in the snapshot's window.

:func:`compaction_to_target` answers the other question: the fewest logs to compact to bring the
entry logs under a byte target now, and the free space the transactional compactor needs to do it
(the largest live part of one log: the copy exists before its source is deleted).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from ..bookkeeper.gc import GcConfig, GcState, compaction_level, log_usage, select_for_compaction
from ..managed_ledger.trim import retention_candidates
from ..scan.datadir import DataDir
from .policies import Settings, TopicPolicy, find_config_files, resolve
from .topic_policies import read_topic_policies

HOUR_MS = 3_600_000


@dataclass(frozen=True)
class WhatIf:
    """The settings to simulate. A None setting is the data's own (:mod:`pulsarkit.analysis.policies`:
    the topic policies in the namespaces' ``__change_events`` topics, else the namespace policies in the
    store, else the configuration files beside the data, else Pulsar's
    defaults: retention 0 minutes / 0 MB, so consumed ledgers go at once, no TTL, the retention check
    every 120 s); a value given here overrides that for every topic."""

    retention_time_minutes: int | None = None
    retention_size_mb: int | None = None
    ttl_seconds: int | None = None
    retention_check_interval_s: int | None = None
    #: the whole GC configuration (None: the bookie's configuration file, else the defaults) ...
    gc: GcConfig | None = None
    #: ... and single GcConfig fields to override in it
    gc_overrides: Mapping[str, Any] = field(default_factory=dict)
    #: the configuration files to read (None: those found beside the data; (): none)
    config_files: tuple[str, ...] | None = None
    horizon_hours: float = 48.0
    #: When the bookies last compacted (ms before the snapshot); the default assumes they just did.
    last_minor_ago_ms: int = 0
    last_major_ago_ms: int = 0
    #: False: topics with no cursor activity are never loaded, so never trimmed (Pulsar #9057).
    assume_loaded: bool = True
    now_ms: int | None = None


def _snapshot_now(dd: DataDir) -> int:
    stamps = [li.timestamp for info in dd.ml_infos.values() for li in info.ledgerInfo if li.timestamp > 0]
    ctimes = [led.ctime for led in dd.ledgers.values() if led.ctime]
    return max(stamps + ctimes, default=0)


class _Topic:
    def __init__(self, dd: DataDir, ml: str) -> None:
        self.name = ml
        self.infos = [
            SimpleNamespace(ledger_id=li.ledgerId, entries=li.entries, size=li.size, timestamp=li.timestamp)
            for li in dd.ml_infos[ml].ledgerInfo
        ]
        self.current = self.infos[-1].ledger_id if self.infos else -1
        cursors = dd.cursors(ml)
        by_id = {i.ledger_id: i for i in self.infos}
        if not cursors:
            self.slowest = self.current + 1
        else:
            pos = min(c.mark_delete for c in cursors)
            li = by_id.get(pos.ledger_id)
            full = li is not None and li.ledger_id != self.current and li.entries == pos.entry_id + 1
            self.slowest = pos.ledger_id + 1 if full else pos.ledger_id
        self.active = any(c.last_active for c in cursors)

    def trim(self, now: int, p: TopicPolicy) -> list[Any]:
        slowest = self.slowest
        if p.ttl_seconds > 0:  # TTL acknowledges whole ledgers closed long enough ago
            for li in self.infos:
                if li.ledger_id != self.current and now - li.timestamp > p.ttl_seconds * 1000:
                    slowest = max(slowest, li.ledger_id + 1)
        total = sum(li.size for li in self.infos)
        time_ms = p.retention_time_minutes * 60_000 if p.retention_time_minutes >= 0 else -1
        items = retention_candidates(self.infos, self.current, slowest, total, time_ms, p.retention_size_mb, now)
        gone = {it.ledger_id for it in items}
        self.infos = [li for li in self.infos if li.ledger_id not in gone]
        return items


@dataclass
class _Log:
    bookie: str
    log_id: int
    total: int
    ledgers: dict[int, int]


def _logs(dd: DataDir) -> list[_Log]:
    return [
        _Log(path.rsplit("/", 1)[0], log_id, md.total_size, dict(md.ledgers)) for path, log_id, md in dd.entry_logs()
    ]


def settings_of(dd: DataDir, w: WhatIf | None = None) -> Settings:
    """The settings ``w`` leaves to the data, resolved from its policies and configuration files."""
    w = w or WhatIf()
    files = w.config_files
    if files is None:
        files = tuple(str(p) for p in find_config_files([dd.metadata_dir.parent, *(d.parent for d in dd.ledger_dirs)]))
    flags = {
        "retention_time_minutes": w.retention_time_minutes,
        "retention_size_mb": w.retention_size_mb,
        "ttl_seconds": w.ttl_seconds,
        "retention_check_interval_s": w.retention_check_interval_s,
        **w.gc_overrides,
    }
    return resolve(dd.nodes, files, flags, w.gc, read_topic_policies(dd))


def simulate(dd: DataDir, w: WhatIf | None = None) -> dict[str, Any]:
    """The timeline of ledger deletions, log removals and compactions (see the module docstring)."""
    w = w or WhatIf()
    st = settings_of(dd, w)
    gc = st.gc
    gc.validate()
    t0 = w.now_ms if w.now_ms is not None else _snapshot_now(dd)
    topics = [_Topic(dd, ml) for ml in sorted(dd.ml_infos)]
    policies = {tp.name: st.topic(tp.name) for tp in topics}
    live = {lid for lid, led in dd.ledgers.items() if led.state != "DELETED"}
    logs = _logs(dd)
    disk = {lg.bookie: 0 for lg in logs}
    for lg in logs:
        disk[lg.bookie] += lg.total
    rows: list[dict[str, Any]] = []
    start_disk = dict(disk)

    def emit(t: int, event: str, **kw: Any) -> None:
        rows.append({"time_ms": t, "hours": round((t - t0) / HOUR_MS, 3), "event": event, **kw})

    last_minor, last_major = t0 - w.last_minor_ago_ms, t0 - w.last_major_ago_ms
    end = t0 + int(w.horizon_hours * HOUR_MS)
    next_retention, next_gc = t0, t0 + gc.gc_wait_time_ms
    written = 0
    while min(next_retention, next_gc) <= end:
        if next_retention <= next_gc:
            t = next_retention
            for tp in topics:
                if not w.assume_loaded and not tp.active:
                    continue
                for it in tp.trim(t, policies[tp.name]):
                    live.discard(it.ledger_id)
                    emit(
                        t,
                        "ledger_deleted",
                        ledger_id=it.ledger_id,
                        topic=tp.name,
                        reason=it.reason,
                        bytes=it.size,
                        closed_ms=it.timestamp,
                    )
            next_retention += st.broker["retention_check_interval_s"] * 1000
            continue
        t = next_gc
        next_gc += gc.gc_wait_time_ms
        kept = []
        for lg in logs:
            lg.ledgers = {lid: b for lid, b in lg.ledgers.items() if lid in live}
            if not lg.ledgers:
                disk[lg.bookie] -= lg.total
                emit(
                    t, "log_removed", bookie=lg.bookie, log_id=lg.log_id, bytes_reclaimed=lg.total, disk=disk[lg.bookie]
                )
            else:
                kept.append(lg)
        logs = kept
        gc_state = GcState(last_minor, last_major)
        level, threshold, _ = compaction_level(gc, t, gc_state)
        if level is None:
            continue
        last_minor, last_major = t, (t if level == "major" else last_major)
        usages = ((lg, lg.log_id, log_usage(sum(lg.ledgers.values()), lg.total, gc)) for lg in logs)
        for lg, usage in select_for_compaction(usages, threshold):
            remaining = sum(lg.ledgers.values())
            reclaimed = lg.total - remaining
            disk[lg.bookie] -= reclaimed
            written += remaining
            emit(
                t,
                f"{level}_compaction",
                bookie=lg.bookie,
                log_id=lg.log_id,
                usage=round(usage, 4),
                bytes_reclaimed=reclaimed,
                bytes_written=remaining,
                disk=disk[lg.bookie],
            )
            lg.total = remaining  # the copy: every byte in it is live
    reclaimed_total = sum(start_disk.values()) - sum(disk.values())
    return {
        "now_ms": t0,
        "settings": {
            # the broker-wide values (a flag's, else the configuration's); each topic's own are in "topics"
            **{k: st.overrides.get(k, st.broker[k]) for k in ("retention_time_minutes", "retention_size_mb")},
            "ttl_seconds": st.overrides.get("ttl_seconds", st.broker["ttl_seconds"]),
            "retention_check_interval_s": st.broker["retention_check_interval_s"],
            "horizon_hours": w.horizon_hours,
            "gc": {k: getattr(gc, k) for k in gc.__dataclass_fields__},
            "assume_loaded": w.assume_loaded,
            **st.as_dict(),
        },
        #: the retention and TTL each topic was simulated with, and where they came from
        "topics": {ml: dict(p.__dict__) for ml, p in policies.items()},
        "timeline": rows,
        "summary": {
            "bookies": {b: {"bytes_before": start_disk[b], "bytes_after": disk[b]} for b in sorted(disk)},
            "bytes_reclaimed": reclaimed_total,
            "bytes_written_by_compaction": written,
            "ledgers_deleted": sum(r["event"] == "ledger_deleted" for r in rows),
            "logs_removed": sum(r["event"] == "log_removed" for r in rows),
            "logs_compacted": sum(r["event"].endswith("_compaction") for r in rows),
        },
    }


def compaction_to_target(dd: DataDir, target_bytes: int) -> dict[str, Any]:
    """The fewest entry logs to compact now to get the logs under ``target_bytes``: most dead bytes
    first. Says if the target cannot be reached by compaction alone, and the headroom needed."""
    live = {lid for lid, led in dd.ledgers.items() if led.state != "DELETED"}
    logs = _logs(dd)
    total = sum(lg.total for lg in logs)
    scored = []
    for lg in logs:
        remaining = sum(b for lid, b in lg.ledgers.items() if lid in live)
        if lg.total and remaining < lg.total:
            scored.append((lg.total - remaining, lg, remaining))
    scored.sort(key=lambda x: (-x[0], x[2], x[1].log_id))
    chosen: list[dict[str, Any]]
    chosen, after = [], total
    for dead, lg, remaining in scored:
        if after <= target_bytes:
            break
        after -= dead
        chosen.append(
            {
                "bookie": lg.bookie,
                "log_id": lg.log_id,
                "total": lg.total,
                "live": remaining,
                "dead": dead,
                "usage": round(remaining / lg.total, 4),
            }
        )
    return {
        "bytes_now": total,
        "target_bytes": target_bytes,
        "bytes_after": after,
        "reachable": after <= target_bytes,
        "logs": chosen,
        "headroom_bytes": max((c["live"] for c in chosen), default=0),
        #: a major compaction threshold just above the fullest chosen log picks all of them
        "major_threshold_needed": round(max((c["usage"] for c in chosen), default=0.0) + 0.0001, 4),
    }
