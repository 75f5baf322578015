"""Bookie GC over many ledger directories (many bookies, or one bookie's several directories), written
once: ``pulsarkit gc``, the Spark planner (:func:`pulsarkit.spark.storage.gc_plans`) and
:meth:`pulsarkit.managed_ledger.factory.ManagedLedgerFactory.garbage_collect` all call it.

:func:`plan_bookies` reads the metadata store's ledger set once and plans each directory's run with
:class:`~pulsarkit.bookkeeper.gc.GarbageCollector` from it and from each log's facts (read here, or
by Spark tasks and handed in as ``entry_logs``): a :class:`GcPlans`, one :class:`GcPlan` per directory.
A dry run is that plan alone. :func:`execute_bookies` applies each directory's plan (re-checked item
by item by :meth:`GarbageCollector.execute`) and returns one :class:`BookieGcRun` per directory.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..errors import BookieError
from ..plan import Plan, PlanItem
from .gc import EntryLogFacts, GarbageCollector, GcConfig, GcPlan, GcRequest, GcResult, GcState, LedgerManager
from .ledger_storage import SingleDirectoryDbLedgerStorage


@dataclass(frozen=True)
class GcPlans(Plan):
    """The GC plans of several ledger directories (``pulsarkit gc --plan`` writes one)."""

    KIND: ClassVar[str] = "bookie-gc-plans"

    created_ms: int
    bookies: list[GcPlan]
    #: The metadata store's ledger count when planned (each directory's own state is in its plan).
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def items(self) -> list[PlanItem]:
        return [it for p in self.bookies for it in p.items]

    @property
    def bytes_reclaimed_estimate(self) -> int:
        return sum(p.bytes_reclaimed_estimate for p in self.bookies)

    def for_dir(self, ledger_dir: str) -> GcPlan:
        for p in self.bookies:
            if p.ledger_dir == ledger_dir:
                return p
        raise BookieError(f"the plan has nothing for {ledger_dir}")


@dataclass(frozen=True)
class BookieGcRun:
    """One directory's run: its plan and what executing it did (None for a dry run)."""

    ledger_dir: str
    plan: GcPlan
    result: GcResult | None


@contextmanager
def open_bookies(dirs: Sequence[Any], *, read_only: bool) -> Iterator[list[SingleDirectoryDbLedgerStorage]]:
    """The ledger directories opened (read-only for a dry run: a running bookie's RocksDB lock also
    keeps it out of a write), closed on exit."""
    storages: list[SingleDirectoryDbLedgerStorage] = []
    try:
        for d in dirs:
            storages.append(SingleDirectoryDbLedgerStorage(str(d), read_only=read_only))
        yield storages
    finally:
        for s in storages:
            s.close()


def _collector(
    storage: SingleDirectoryDbLedgerStorage,
    ledger_manager: LedgerManager,
    config: GcConfig | None,
    states: Mapping[str, GcState] | None,
    clock_ms: Callable[[], int] | None,
) -> GarbageCollector:
    state = None if states is None else states.get(storage.ledger_dir)
    return GarbageCollector(storage, ledger_manager, config, state=state, clock_ms=clock_ms)


def plan_bookies(
    storages: Sequence[SingleDirectoryDbLedgerStorage],
    ledger_manager: LedgerManager,
    config: GcConfig | None = None,
    request: GcRequest = GcRequest(),
    *,
    entry_logs: Sequence[Mapping[int, EntryLogFacts]] | None = None,
    states: Mapping[str, GcState] | None = None,
    clock_ms: Callable[[], int] | None = None,
) -> GcPlans:
    """Every directory's GC run, as ``request`` asks, planned from one read of the metadata store's ledgers.
    ``entry_logs`` (one mapping per storage, in order) holds logs already read elsewhere; ``states`` each
    directory's last compaction times (by ledger dir)."""
    if entry_logs is not None and len(entry_logs) != len(storages):
        raise BookieError(f"{len(entry_logs)} sets of entry-log facts for {len(storages)} ledger directories")
    known = set(ledger_manager.ledger_ids())
    plans = []
    for i, s in enumerate(storages):
        gc = _collector(s, ledger_manager, config, states, clock_ms)
        logs = entry_logs[i] if entry_logs is not None else None
        plans.append(gc.plan(request, entry_logs=logs, known_ledgers=known))
    now = clock_ms() if clock_ms is not None else int(time.time() * 1000)
    return GcPlans(created_ms=now, bookies=plans, state={"ledgers_in_metadata": len(known)})


def execute_bookies(
    storages: Sequence[SingleDirectoryDbLedgerStorage],
    ledger_manager: LedgerManager,
    plans: GcPlans,
    config: GcConfig | None = None,
    *,
    states: Mapping[str, GcState] | None = None,
    clock_ms: Callable[[], int] | None = None,
) -> list[BookieGcRun]:
    """Each directory's plan applied, re-checked item by item. Every directory must have its plan
    (:class:`BookieError` before anything is done otherwise)."""
    mine = [plans.for_dir(s.ledger_dir) for s in storages]
    out = []
    for s, p in zip(storages, mine, strict=True):
        gc = _collector(s, ledger_manager, config, states, clock_ms)
        out.append(BookieGcRun(s.ledger_dir, p, gc.execute(p)))
    return out


__all__ = ["BookieGcRun", "GcPlans", "execute_bookies", "open_bookies", "plan_bookies"]
