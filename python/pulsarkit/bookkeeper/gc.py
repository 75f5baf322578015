"""Bookie garbage collection as BookKeeper's ``GarbageCollectorThread`` does it, for one ledger directory
of pulsarkit's own bookie, in the plan → dry run → execute shape.

:meth:`GarbageCollector.plan` is pure and returns a :class:`GcPlan` (:mod:`pulsarkit.plan`: frozen,
JSON-serialisable, a reason per item):

1. ``doGcLedgers``: ledgers the bookie holds that the metadata store no longer has (with
   ``verify_metadata_on_gc`` each is re-read before it counts; a ledger whose metadata read fails is
   never deleted);
2. ``doGcEntryLogs``: entry logs none of whose ledgers is left;
3. ``doCompactEntryLogs``: the level that is due (major wins; ``force`` ignores intervals, as the
   manual trigger does), and the logs under its usage threshold, lowest of the ten usage buckets first.

:meth:`GarbageCollector.execute` re-checks every item against the current state (a ledger the metadata
has again, a log whose size changed, the active log: skipped, and said so), recovers any compaction a
crash interrupted, then deletes, removes and compacts. Compaction is the transactional compactor: the
live records are copied natively, each entry's digest verified, into ``<dst>.log.compacting``, sealed
and renamed ``<dst>.log.<src>.compacted``; then the index moves to ``<dst>.log`` and the source goes.
A crash at any point leaves either the old log or the new one fully indexed (see :meth:`recover`).
``max_time_ms`` stops between logs; throttling keeps copies under ``compaction_rate`` entries or bytes
per second.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from .. import _native
from ..errors import BookieError, PulsarkitError
from ..plan import Plan, PlanItem, Skipped
from .cookie import read_cookie
from .digest import digest_type_name
from .entrylog import EntryLogMetadata, EntryLogReader
from .ledger_storage import SingleDirectoryDbLedgerStorage


@dataclass(frozen=True)
class GcConfig:
    """``ServerConfiguration``'s GC settings; defaults are Pulsar's ``conf/bookkeeper.conf``."""

    gc_wait_time_ms: int = 900_000
    minor_compaction_threshold: float = 0.2
    minor_compaction_interval_s: int = 3600
    major_compaction_threshold: float = 0.5
    major_compaction_interval_s: int = 86_400
    minor_compaction_max_time_ms: int = -1
    major_compaction_max_time_ms: int = -1
    #: ``isThrottleByBytes``: throttle by bytes per second instead of entries per second.
    throttle_by_bytes: bool = False
    compaction_rate_by_entries: int = 1000
    compaction_rate_by_bytes: int = 1_000_000
    force_allow_compaction: bool = True
    verify_metadata_on_gc: bool = False
    #: ``logSizeLimit`` for ``useTargetEntryLogSizeForGc`` (off by default, as in BookKeeper).
    use_target_entry_log_size_for_gc: bool = False
    log_size_limit: int = 1 << 30
    #: disk pressure: at ``diskUsageWarnThreshold`` major compaction is suspended, at
    #: ``diskUsageThreshold`` minor too; with ``isForceGCAllowWhenNoSpace`` both force a run instead
    disk_usage_warn_threshold: float = 0.90
    disk_usage_threshold: float = 0.95
    force_gc_allow_when_no_space: bool = False

    def minor_enabled(self) -> bool:
        return self.minor_compaction_interval_s > 0 and self.minor_compaction_threshold > 0

    def major_enabled(self) -> bool:
        return self.major_compaction_interval_s > 0 and self.major_compaction_threshold > 0

    def validate(self) -> None:
        """The ``GarbageCollectorThread`` constructor's checks."""
        for level in ("minor", "major"):
            if getattr(self, f"{level}_enabled")():
                t = getattr(self, f"{level}_compaction_threshold")
                i = getattr(self, f"{level}_compaction_interval_s")
                if t > 1.0:
                    raise BookieError(f"{level} compaction threshold {t} is above 1.0")
                if i * 1000 < self.gc_wait_time_ms:
                    raise BookieError(f"{level} compaction interval {i}s is shorter than gcWaitTime")
        if self.minor_enabled() and self.major_enabled():
            if self.minor_compaction_interval_s >= self.major_compaction_interval_s:
                raise BookieError("minor compaction interval must be shorter than the major one")
            if self.minor_compaction_threshold >= self.major_compaction_threshold:
                raise BookieError("minor compaction threshold must be below the major one")


@dataclass(frozen=True)
class EntryLogFacts:
    """What a GC plan reads of one entry log."""

    log_id: int
    #: ``EntryLogMetadata``: the ledgers map, or a scan of the log when it has none.
    metadata: EntryLogMetadata
    #: The file's size on disk (header and ledgers map included): what removing it frees.
    file_size: int


def read_entry_log(current: str, log_id: int) -> EntryLogFacts:
    """The per-log work of a GC plan (as ``SingleDirectoryDbLedgerStorage.entry_log_metadata`` and
    ``entry_log_size`` read it), for the log ``log_id`` in the ledger directory's ``current/``."""
    md = EntryLogReader(current).metadata(log_id)
    return EntryLogFacts(log_id, md, os.path.getsize(os.path.join(current, f"{log_id:x}.log")))


class LedgerManager(Protocol):
    """What GC asks the metadata store (:class:`pulsarkit.metadata.store.MetadataStore` and
    :class:`pulsarkit.metadata.reader.LedgerIndex` fit)."""

    def ledger_ids(self) -> list[int]: ...

    def ledger_metadata(self, ledger_id: int) -> Any: ...

    def next_ledger_id(self) -> int | None:
        """The lowest ledger id the cluster's id generator had not issued when the metadata was read, or
        None when it does not say."""
        ...

    def cluster_instance_id(self) -> str | None:
        """``/ledgers/INSTANCEID``, which every bookie's cookie of the cluster names, or None."""
        ...


def check_metadata_covers(
    ledger_dir: str, ledger_manager: LedgerManager, local: Iterable[int], known: set[int]
) -> None:
    """Refuses (:class:`BookieError`) to collect ``ledger_dir`` against metadata that cannot be this bookie's
    as it is now. GC deletes every ledger the metadata lacks, so metadata of another cluster, or an old copy,
    would delete live ledgers. BookKeeper's own GC cannot meet either: a bookie with another cluster's cookie
    does not start, and it reads the live metadata after listing its ledgers. Two checks:

    * the directory's cookie names another cluster (``instanceId``) than the metadata's ``INSTANCEID``;
    * the bookie holds a ledger the metadata lacks whose id its id generator had not issued yet (every
      ledger is created in the metadata before a bookie sees an entry of it), or, when the generator does
      not say, whose id is above every ledger the metadata has."""
    cookie = read_cookie(Path(ledger_dir))
    ours, theirs = (cookie.instance_id if cookie else None), ledger_manager.cluster_instance_id()
    if ours and theirs and ours != theirs:
        raise BookieError(
            f"refusing GC of {ledger_dir}: its cookie is of cluster {ours}, the metadata is of cluster {theirs}; "
            "give the metadata of the cluster this bookie belongs to"
        )
    issued = ledger_manager.next_ledger_id()
    newest = max(known, default=-1)
    unknown = sorted(
        lid for lid in local if lid not in known and (lid >= issued if issued is not None else lid > newest)
    )
    if unknown:
        said = (
            f"its id generator had issued ids below {issued} only"
            if issued is not None
            else f"the newest ledger it has is {newest} and its id generator's state is not in it"
        )
        raise BookieError(
            f"refusing GC of {ledger_dir}: it holds {len(unknown)} ledger(s) the metadata cannot have deleted "
            f"(first {unknown[:5]}): {said}. The metadata is older than this bookie (a stale copy or snapshot) "
            "or not this cluster's; give its current state"
        )


@dataclass
class GcState:
    """When each compaction level last ran (ms), as the GC thread remembers it."""

    last_minor_ms: int = 0
    last_major_ms: int = 0


def _bucket(usage: float) -> int:
    return min(9, int(usage * 10))


def log_usage(remaining: int, total: int, config: GcConfig) -> float:
    """The usage GC compares to a compaction threshold: the live fraction of the log (of
    ``logSizeLimit`` instead, with ``useTargetEntryLogSizeForGc``, for a log not fully live)."""
    usage = remaining / total if total else 1.0
    if config.use_target_entry_log_size_for_gc and usage < 1:
        usage = remaining / max(total, config.log_size_limit)
    return usage


@dataclass(frozen=True)
class GcRequest:
    """What one GC run is asked, beside the configuration: ``force`` is the manual trigger (``forceGC``:
    intervals ignored), ``suspend_major``/``suspend_minor`` keep a level from running (``suspendMajorGC``,
    ``suspendMinorGC``), ``disk_usage`` is the directory's used fraction to assume (measured when None)."""

    force: bool = False
    suspend_major: bool = False
    suspend_minor: bool = False
    disk_usage: float | None = None


def compaction_level(
    config: GcConfig, now_ms: int, state: GcState, request: GcRequest = GcRequest()
) -> tuple[str | None, float, int]:
    """The compaction level due now, ``(level, threshold, max_time_ms)``; ``(None, 0.0, -1)`` when none
    is: major wins when its interval has passed (``request.force`` ignores intervals and, with
    ``force_allow_compaction``, runs a disabled level), a suspended level never runs."""
    cfg = config
    force, suspend_major, suspend_minor = request.force, request.suspend_major, request.suspend_minor
    major_due = now_ms - state.last_major_ms >= cfg.major_compaction_interval_s * 1000
    minor_due = now_ms - state.last_minor_ms >= cfg.minor_compaction_interval_s * 1000
    can_major = (cfg.major_enabled() or (force and cfg.force_allow_compaction)) and not suspend_major
    can_minor = (cfg.minor_enabled() or (force and cfg.force_allow_compaction)) and not suspend_minor
    if can_major and (force or major_due):
        return "major", cfg.major_compaction_threshold, cfg.major_compaction_max_time_ms
    if can_minor and (force or minor_due):
        return "minor", cfg.minor_compaction_threshold, cfg.minor_compaction_max_time_ms
    return None, 0.0, -1


L = TypeVar("L")


def select_for_compaction(logs: Iterable[tuple[L, int, float]], threshold: float) -> list[tuple[L, float]]:
    """``doCompactEntryLogs``' choice: of ``(log, log id, usage)``, the logs under ``threshold``,
    lowest of the ten usage buckets first, by log id within a bucket. The one rule GC plans with and
    :mod:`pulsarkit.analysis.whatif` replays."""
    cands = [(lg, log_id, usage) for lg, log_id, usage in logs if usage < threshold]
    cands.sort(key=lambda c: (_bucket(c[2]), c[1]))
    return [(lg, usage) for lg, _, usage in cands]


def reclaiming_level(usage: float, minor_threshold: float, major_threshold: float) -> str | None:
    """The first compaction level that rewrites a log of ``usage`` (a log under a level's threshold is
    a candidate, as in :func:`select_for_compaction`): ``"minor"``, ``"major"``, or None (neither)."""
    if usage < minor_threshold:
        return "minor"
    if usage < major_threshold:
        return "major"
    return None


@dataclass(frozen=True)
class DiskPressure:
    """What the ledger directory's fill level does to a run (``SingleDirectoryDbLedgerStorage``'s disk
    listener): ``state`` ``ok``, ``almost_full`` (major suspended) or ``full`` (minor too), unless
    ``force_gc_allow_when_no_space`` forces the run instead."""

    disk_usage: float
    state: str
    force: bool
    suspend_major: bool
    suspend_minor: bool


@dataclass(frozen=True)
class LedgerToDelete(PlanItem):
    """A ledger the bookie holds that the metadata store no longer has (``doGcLedgers``)."""

    ledger_id: int
    reason: str


@dataclass(frozen=True)
class LogToRemove(PlanItem):
    """An entry log with no live ledger left (``doGcEntryLogs``): removing it frees ``file_size``."""

    log_id: int
    total_size: int
    file_size: int
    reason: str


@dataclass(frozen=True)
class LogToCompact(PlanItem):
    """An entry log under the level's threshold: its live ``ledgers`` are copied, the rest reclaimed."""

    log_id: int
    total_size: int
    remaining_size: int
    usage: float
    ledgers: list[int]
    bucket: int
    reason: str


@dataclass(frozen=True)
class GcCompaction:
    """The compaction a run makes: ``level`` None when none is due."""

    level: str | None
    threshold: float
    max_time_ms: int
    logs: list[LogToCompact] = field(default_factory=list)


@dataclass(frozen=True)
class GcPlan(Plan):
    """One GC run of one ledger directory, planned (see the module docstring)."""

    KIND: ClassVar[str] = "bookie-gc"

    ledger_dir: str
    created_ms: int
    active_log_id: int | None
    disk_pressure: DiskPressure
    forced: bool
    ledgers_to_delete: list[LedgerToDelete]
    logs_to_remove: list[LogToRemove]
    compaction: GcCompaction
    bytes_reclaimed_estimate: int
    #: What the plan was made on: the entry logs (id -> total size) and the ledgers the bookie held.
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def items(self) -> list[PlanItem]:
        return [*self.ledgers_to_delete, *self.logs_to_remove, *self.compaction.logs]


@dataclass(frozen=True)
class CompactedLog:
    """One log compacted: ``into`` the new log (None when nothing in it was live)."""

    log_id: int
    into: int | None
    entries: int
    bytes: int
    dropped_entries: int
    dropped_bytes: int


@dataclass(frozen=True)
class Recovered:
    """A compaction a crash interrupted, finished or rolled back by :meth:`GarbageCollector.recover`."""

    file: str
    action: str


@dataclass
class GcResult:
    """What :meth:`GarbageCollector.execute` did."""

    deleted_ledgers: list[int] = field(default_factory=list)
    removed_logs: list[int] = field(default_factory=list)
    compacted_logs: list[CompactedLog] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    recovered: list[Recovered] = field(default_factory=list)
    reclaimed_bytes: int = 0
    written_bytes: int = 0
    stopped_by_max_time: bool = False


class GarbageCollector:
    """GC of one ledger directory against a metadata store (see the module docstring)."""

    def __init__(
        self,
        storage: SingleDirectoryDbLedgerStorage,
        ledger_manager: LedgerManager,
        config: GcConfig | None = None,
        *,
        state: GcState | None = None,
        clock_ms: Callable[[], int] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        fsync: bool = True,
    ) -> None:
        self.storage = storage
        self.ledger_manager = ledger_manager
        self.config = config or GcConfig()
        self.config.validate()
        self.state = state or GcState()
        self._clock = clock_ms or (lambda: int(time.time() * 1000))
        self._sleep = sleep
        self.fsync = fsync

    # ------------------------------------------------------------------------------ plan

    def _metadata_has(self, lid: int) -> bool | None:
        """True/False from a fresh metadata read; None when the read failed (never delete then)."""
        try:
            self.ledger_manager.ledger_metadata(lid)
            return True
        except KeyError:
            return False
        except PulsarkitError:
            return None

    def disk_pressure(self, disk_usage: float | None = None) -> DiskPressure:
        """What the ledger directory's fill level does to this run, as ``SingleDirectoryDbLedgerStorage``'s
        disk listener decides it: ``disk_usage`` is the used fraction (measured when not given)."""
        cfg = self.config
        if disk_usage is None:
            du = shutil.disk_usage(self.storage.current)
            disk_usage = (du.total - du.free) / du.total if du.total else 0.0
        state = "ok"
        if disk_usage >= cfg.disk_usage_threshold:
            state = "full"
        elif disk_usage >= cfg.disk_usage_warn_threshold:
            state = "almost_full"
        force = state != "ok" and cfg.force_gc_allow_when_no_space
        return DiskPressure(
            disk_usage=round(disk_usage, 4),
            state=state,
            force=force,
            suspend_major=state != "ok" and not force,
            suspend_minor=state == "full" and not force,
        )

    def plan(
        self,
        request: GcRequest = GcRequest(),
        *,
        entry_logs: Mapping[int, EntryLogFacts] | None = None,
        known_ledgers: set[int] | None = None,
    ) -> GcPlan:
        """The run a GC thread would make now, as ``request`` asks (:class:`GcRequest`); the
        directory's disk usage (measured unless given) may suspend a level or, with
        ``force_gc_allow_when_no_space``, force the run, and the plan says which. ``entry_logs``
        holds logs already read by :func:`read_entry_log` elsewhere (one Spark task per log in
        :mod:`pulsarkit.spark.storage`); each log it lacks is read here. ``known_ledgers`` is the
        metadata store's ledger set when the caller read it once for many bookies."""
        cfg = self.config
        now = self._clock()
        s = self.storage
        pressure = self.disk_pressure(request.disk_usage)
        request = GcRequest(
            force=request.force or pressure.force,
            suspend_major=request.suspend_major or pressure.suspend_major,
            suspend_minor=request.suspend_minor or pressure.suspend_minor,
            disk_usage=request.disk_usage,
        )
        known = set(self.ledger_manager.ledger_ids()) if known_ledgers is None else known_ledgers
        local = {lid for lid, ld in s.ledger_data.items() if ld.exists}
        check_metadata_covers(s.ledger_dir, self.ledger_manager, local, known)
        delete = []
        for lid in sorted(local - known):
            if cfg.verify_metadata_on_gc:
                has = self._metadata_has(lid)
                if has is not False:
                    continue  # present after all, or unknown: never delete on a failed read
            delete.append(LedgerToDelete(lid, "not in the metadata store (doGcLedgers)"))
        gone = {d.ledger_id for d in delete}
        active = s.active_log_id()
        logs: list[tuple[tuple[int, int, int, list[int]], int, float]] = []
        remove: list[LogToRemove] = []
        sizes: dict[str, int] = {}
        for log_id in s.entry_log_ids():
            if log_id == active:
                continue
            facts = (entry_logs or {}).get(log_id) or read_entry_log(s.current, log_id)
            md = facts.metadata
            sizes[str(log_id)] = md.total_size
            live = {lid: size for lid, size in md.ledgers.items() if lid in local and lid not in gone}
            total = md.total_size
            if not live:
                # an empty log too (a preallocated one the bookie never wrote): extractMetaFromEntryLogs
                # finds no ledger in it and deletes it
                why = (
                    "no ledger in it (extractMetaFromEntryLogs)"
                    if not md.ledgers
                    else "no live ledger left (doGcEntryLogs)"
                )
                remove.append(LogToRemove(log_id, total, facts.file_size, why))
                continue
            remaining = sum(live.values())
            logs.append(((log_id, total, remaining, sorted(live)), log_id, log_usage(remaining, total, cfg)))
        level, threshold, max_time = compaction_level(cfg, now, self.state, request)
        compact = []
        if level is not None:
            for (log_id, total, remaining, ledgers), usage in select_for_compaction(logs, threshold):
                compact.append(
                    LogToCompact(
                        log_id,
                        total,
                        remaining,
                        usage,
                        ledgers,
                        _bucket(usage),
                        f"usage {usage:.1%} below the {level} threshold {threshold:.0%}",
                    )
                )
        return GcPlan(
            ledger_dir=s.ledger_dir,
            created_ms=now,
            active_log_id=active,
            disk_pressure=pressure,
            forced=request.force,
            ledgers_to_delete=delete,
            logs_to_remove=remove,
            compaction=GcCompaction(level, threshold, max_time, compact),
            bytes_reclaimed_estimate=sum(r.file_size for r in remove)
            + sum(c.total_size - c.remaining_size for c in compact),
            state={"entry_logs": sizes, "ledgers": sorted(local)},
        )

    # ------------------------------------------------------------------------------ execute

    def recover(self) -> list[Recovered]:
        """``cleanUpAndRecover``: ``.compacting`` copies are deleted (phase two never finished: the source
        is intact); each ``<dst>.log.<src>.compacted`` finishes phase three (its locations rescanned)."""
        s = self.storage
        out = []
        for name in sorted(os.listdir(s.current)):
            path = os.path.join(s.current, name)
            if name.endswith(".log.compacting"):
                os.remove(path)
                out.append(Recovered(name, "deleted an unfinished copy"))
                continue
            pair = _native.parse_compacted_name(name)
            if pair is None:
                continue
            dst, src = pair
            locs = _native.compacted_locations(path, dst)
            moved = s.install_compacted_log(path, dst, src, locs)
            out.append(Recovered(name, f"finished: {moved} entries moved to {dst:x}.log"))
        return out

    def _digests(self, lids: list[int]) -> dict[int, tuple[str, bytes] | None]:
        out: dict[int, tuple[str, bytes] | None] = {}
        for lid in lids:
            try:
                md, _ = self.ledger_manager.ledger_metadata(lid)
                out[lid] = (digest_type_name(md.digestType), bytes(md.password))
            except (KeyError, PulsarkitError):
                out[lid] = None  # copied, not verified: the bytes are kept as they are
        return out

    def _throttle(self, started: float, entries: int, nbytes: int) -> None:
        cfg = self.config
        rate = cfg.compaction_rate_by_bytes if cfg.throttle_by_bytes else cfg.compaction_rate_by_entries
        if rate <= 0:
            return
        need = (nbytes if cfg.throttle_by_bytes else entries) / rate
        spent = time.monotonic() - started
        if need > spent:
            self._sleep(need - spent)

    def execute(self, plan: GcPlan) -> GcResult:
        """Applies a plan after re-checking each item against the current state: an item the state
        moved away from (a ledger the metadata has again, a log that changed, the active log) is
        skipped and said so, as the GC thread's own checks do."""
        if not isinstance(plan, GcPlan) or plan.ledger_dir != self.storage.ledger_dir:
            raise BookieError("not a GC plan for this ledger directory")
        s = self.storage
        known = set(self.ledger_manager.ledger_ids())
        # the metadata may not be the one planned on (another copy, another cluster): checked again
        check_metadata_covers(s.ledger_dir, self.ledger_manager, (d.ledger_id for d in plan.ledgers_to_delete), known)
        res = GcResult(recovered=self.recover())
        for d in plan.ledgers_to_delete:
            lid = d.ledger_id
            if lid in known:
                res.skipped.append(Skipped("ledger", lid, "the metadata store has it again"))
                continue
            if s.ledger_data.get(lid) is None or not s.ledger_data[lid].exists:
                continue
            s.delete_ledger(lid)
            res.deleted_ledgers.append(lid)
        s.flush()  # the deleted ledgers' locations go with the checkpoint
        local = {lid for lid, ld in s.ledger_data.items() if ld.exists}
        active = s.active_log_id()
        for r in plan.logs_to_remove:
            if r.log_id == active or r.log_id not in s.entry_log_ids():
                res.skipped.append(Skipped("log", r.log_id, "active or already gone"))
                continue
            md = s.entry_log_metadata(r.log_id)
            if any(lid in local for lid in md.ledgers):
                res.skipped.append(Skipped("log", r.log_id, "a ledger in it is live again"))
                continue
            s.remove_entry_log(r.log_id)
            res.removed_logs.append(r.log_id)
            res.reclaimed_bytes += r.file_size
        comp = plan.compaction
        started_all = time.monotonic()
        for c in comp.logs:
            if comp.max_time_ms > 0 and (time.monotonic() - started_all) * 1000 >= comp.max_time_ms:
                res.stopped_by_max_time = True
                break
            log_id = c.log_id
            if log_id == active or log_id not in s.entry_log_ids():
                res.skipped.append(Skipped("compaction", log_id, "active or already gone"))
                continue
            md = s.entry_log_metadata(log_id)
            if md.total_size != c.total_size:
                res.skipped.append(Skipped("compaction", log_id, "the log changed since the plan"))
                continue
            live = [lid for lid in md.ledgers if lid in local]
            started = time.monotonic()
            dst = s.next_log_id()
            out = _native.compact_entry_log(s.current, log_id, dst, self._digests(live), self.fsync)
            if out["compacted_path"] is None:
                s.remove_entry_log(log_id)
            else:
                s.install_compacted_log(out["compacted_path"], dst, log_id, out["locations"])
            self._throttle(started, out["entries"], out["bytes"])
            res.compacted_logs.append(
                CompactedLog(
                    log_id,
                    dst if out["compacted_path"] else None,
                    out["entries"],
                    out["bytes"],
                    out["dropped_entries"],
                    out["dropped_bytes"],
                )
            )
            res.reclaimed_bytes += out["dropped_bytes"]
            res.written_bytes += out["bytes"]
        if comp.level == "major":
            self.state.last_major_ms = self.state.last_minor_ms = self._clock()
        elif comp.level == "minor":
            self.state.last_minor_ms = self._clock()
        return res

    def run(self, request: GcRequest = GcRequest(), *, dry_run: bool = False) -> GcPlan | GcResult:
        """One GC pass (``runWithFlags``): the plan alone with ``dry_run``, else plan and execute."""
        p = self.plan(request)
        return p if dry_run else self.execute(p)


__all__ = [
    "CompactedLog",
    "DiskPressure",
    "EntryLogFacts",
    "GarbageCollector",
    "GcCompaction",
    "GcConfig",
    "GcPlan",
    "GcRequest",
    "GcResult",
    "GcState",
    "LedgerManager",
    "LedgerToDelete",
    "LogToCompact",
    "LogToRemove",
    "Recovered",
    "compaction_level",
    "log_usage",
    "reclaiming_level",
    "read_entry_log",
    "select_for_compaction",
]
