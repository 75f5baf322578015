"""Retention: deleting the ledgers every durable cursor has consumed (``internalTrimLedgers``).

Candidates are the ledgers below the slowest mark-delete ledger (that ledger too when the mark-delete
is its last entry and it is not the current ledger; every ledger but the current one when there are
no durable cursors), oldest first, each while ``expired`` (``time >= 0 and now - closeTime > time``)
or ``over quota`` (``size >= 0 and totalSize - sizeDeletedSoFar >= size``, the ledger's own size
included), stopping at the first that is neither. -1 is unlimited; 0 deletes consumed ledgers at
once. The current ledger is never deleted. Deleted ledgers leave the managed-ledger metadata first,
then lose their BookKeeper metadata and bookie index.

Like every maintenance operation here it runs in three steps: :func:`plan` is pure and returns a
:class:`TrimPlan` (JSON-serialisable, a reason per ledger); a dry run is the plan alone;
:func:`execute` re-checks the plan against the managed ledger's current state (a plan made on
another state is refused, never half-applied) and applies it. :func:`trim_ledgers` does both.

Inputs that disagree with each other are refused (:class:`LifecycleError`): negative policies other
than -1, a cursor past the last entry, or a ledger to delete whose metadata names another managed
ledger or is still open.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import LedgerNotFoundError, LifecycleError, StalePlanError
from ..plan import Plan, PlanItem
from ..proto import LedgerMetadataFormat
from .config import MB
from .position import Position

if TYPE_CHECKING:
    from .cursor import ManagedCursor
    from .ledger import LedgerInfo, ManagedLedger


@dataclass(frozen=True)
class TrimItem(PlanItem):
    """One ledger a retention pass deletes, and why."""

    ledger_id: int
    entries: int
    size: int
    #: Close time in ms.
    timestamp: int
    #: ``expired``, ``over_quota``, ``expired+over_quota`` or ``truncate``.
    reason: str


@dataclass(frozen=True)
class TrimPlan(Plan):
    """What a retention pass will do (a :class:`~pulsarkit.plan.Plan`: frozen, JSON round trip)."""

    KIND: ClassVar[str] = "retention"

    managed_ledger: str
    items: list[TrimItem]
    slowest_reader_ledger_id: int
    total_size_before: int
    total_size_after: int
    retention_time_ms: int
    retention_size_mb: int
    now_ms: int
    #: Cursors moved past the deleted ledgers: ``name -> new mark-delete``.
    cursor_advances: dict[str, Position] = field(default_factory=dict)
    #: The state the plan was made on: every ledger ``(id, entries, size)`` and cursor mark-delete.
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def created_ms(self) -> int:
        return self.now_ms


@dataclass(frozen=True)
class TrimResult:
    """What a retention pass deleted (or, with ``dry_run``, would delete)."""

    managed_ledger: str
    deleted: list[LedgerInfo]
    #: ``ledger_id -> "expired" | "over_quota" | "expired+over_quota" | "truncate"``.
    reasons: dict[int, str]
    slowest_reader_ledger_id: int
    total_size_before: int
    total_size_after: int
    retention_time_ms: int
    retention_size_mb: int
    dry_run: bool
    #: Cursors moved past the deleted ledgers: ``name -> new mark-delete``.
    advanced_cursors: dict[str, Position] = field(default_factory=dict)

    @property
    def deleted_ids(self) -> list[int]:
        return [li.ledger_id for li in self.deleted]


def check_policy(name: str, v: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < -1:
        raise LifecycleError(f"{name} must be -1 (unlimited), 0 or positive, got {v!r}")
    return v


def check_cursor(ml: ManagedLedger, cursor: ManagedCursor) -> None:
    """A cursor of this managed ledger whose mark-delete is not past its last entry."""
    if cursor.ml is not ml:
        raise LifecycleError(f"cursor {cursor.name!r} belongs to {cursor.ml.name!r}, not {ml.name!r}")
    lac = ml.last_confirmed_entry
    if cursor.mark_delete_position > lac:
        raise LifecycleError(
            f"cursor {cursor.name!r} of {ml.name!r}: mark-delete {cursor.mark_delete_position} "
            f"is past the last entry {lac}"
        )


def _state(ml: ManagedLedger) -> dict[str, Any]:
    return {
        "ledgers": [[li.ledger_id, li.entries, li.size] for li in ml.ledgers()],
        "current_ledger_id": ml.current_ledger_id,
        "cursors": {c.name: list(c.mark_delete_position) for c in ml.cursors()},
    }


def _check_ledger_metadata(ml: ManagedLedger, ledger_id: int) -> None:
    """Refuses to delete a ledger whose BookKeeper metadata disagrees with the managed ledger."""
    try:
        lmd = ml.ledger_metadata(ledger_id)
    except LedgerNotFoundError:
        return  # already gone from BookKeeper; dropping it from the list is what Pulsar does
    owner = next(
        (e.value.decode("utf-8", "replace") for e in lmd.customMetadata if e.key == "pulsar/managed-ledger"),
        None,
    )
    if owner is not None and owner != ml.name:
        raise LifecycleError(f"ledger {ledger_id} is listed by {ml.name!r} but its metadata names {owner!r}")
    if lmd.state != LedgerMetadataFormat.CLOSED:
        raise LifecycleError(
            f"ledger {ledger_id} of {ml.name!r} is not the current ledger but is still open in BookKeeper"
        )


def retention_candidates(
    infos: list[Any],
    current: int,
    slowest: int,
    total: int,
    time_ms: int,
    size_mb: int,
    now: int,
    truncate: bool = False,
) -> list[TrimItem]:
    """The ledgers one retention pass deletes, oldest first (the rule in the module docstring), from
    plain facts: ``infos`` (``ledger_id``, ``entries``, ``size``, ``timestamp``, in order), the current
    ledger, the first ledger a cursor still needs (``slowest``) and the managed ledger's total size.
    Shared by :func:`plan` and the what-if simulation of a data directory."""
    items: list[TrimItem] = []
    size_to_delete = 0
    for li in infos:
        if li.ledger_id >= slowest or li.ledger_id == current:
            break
        if truncate:
            items.append(TrimItem(li.ledger_id, li.entries, li.size, li.timestamp, "truncate"))
            continue
        size_to_delete += li.size
        over = size_mb >= 0 and total - size_to_delete >= size_mb * MB
        expired = time_ms >= 0 and now - li.timestamp > time_ms
        if not (expired or over):
            break
        reason = "+".join(r for r, ok in (("expired", expired), ("over_quota", over)) if ok)
        items.append(TrimItem(li.ledger_id, li.entries, li.size, li.timestamp, reason))
    return items


def plan(
    ml: ManagedLedger,
    retention_time_ms: int | None = None,
    retention_size_mb: int | None = None,
    now_ms: int | None = None,
    truncate: bool = False,
) -> TrimPlan:
    """One retention pass, planned (nothing changes). Policies default to the managed ledger's config."""
    time_ms = check_policy(
        "retention time", ml.config.retention_time_ms if retention_time_ms is None else retention_time_ms
    )
    size_mb = check_policy(
        "retention size", ml.config.retention_size_mb if retention_size_mb is None else retention_size_mb
    )
    ml.check_open()
    now = ml.now() if now_ms is None else int(now_ms)
    infos = ml.ledgers()
    state = _state(ml)
    if not infos:
        return TrimPlan(ml.name, [], -1, ml.total_size, ml.total_size, time_ms, size_mb, now, {}, state)
    current = ml.current_ledger_id if ml.current_ledger_id is not None else infos[-1].ledger_id
    by_id = {li.ledger_id: li for li in infos}
    cursors = ml.cursors()
    for c in cursors:
        check_cursor(ml, c)

    if not cursors:
        slowest = current + 1
    else:
        pos = ml.slowest_reader_position
        assert pos is not None
        li = by_id.get(pos.ledger_id)
        if li is not None and li.ledger_id != current and li.entries == pos.entry_id + 1:
            slowest = pos.ledger_id + 1
        else:
            slowest = pos.ledger_id

    total = ml.total_size
    items = retention_candidates(infos, current, slowest, total, time_ms, size_mb, now, truncate)

    for it in items:
        _check_ledger_metadata(ml, it.ledger_id)

    advances: dict[str, Position] = {}
    highest = next((Position(it.ledger_id, it.entries - 1) for it in reversed(items) if it.entries > 0), None)
    if highest is not None:
        lac = ml.last_confirmed_entry
        for c in cursors:
            if c.mark_delete_position < highest <= lac:
                advances[c.name] = highest
    size_after = total - sum(it.size for it in items)
    return TrimPlan(ml.name, items, slowest, total, size_after, time_ms, size_mb, now, advances, state)


def _result(ml: ManagedLedger, p: TrimPlan, dry_run: bool) -> TrimResult:
    from_ledgers = {li.ledger_id: li for li in ml.ledgers()}
    deleted = [from_ledgers[it.ledger_id] for it in p.items]
    return TrimResult(
        p.managed_ledger,
        deleted,
        {it.ledger_id: it.reason for it in p.items},
        p.slowest_reader_ledger_id,
        p.total_size_before,
        p.total_size_after,
        p.retention_time_ms,
        p.retention_size_mb,
        dry_run,
        dict(p.cursor_advances),
    )


def execute(ml: ManagedLedger, p: TrimPlan) -> TrimResult:
    """Applies a plan made by :func:`plan` on this managed ledger, after checking that nothing it was
    made on has changed (:class:`StalePlanError`, a :class:`LifecycleError`, otherwise, with nothing done)."""
    if p.managed_ledger != ml.name:
        raise LifecycleError(f"the plan is for {p.managed_ledger!r}, not {ml.name!r}")
    ml.check_mutable()
    if _state(ml) != p.state:
        raise StalePlanError(f"{ml.name!r} changed since the retention plan was made; plan again")
    for it in p.items:
        _check_ledger_metadata(ml, it.ledger_id)
    result = _result(ml, p, dry_run=False)
    if not p.items:
        return result
    for name, pos in p.cursor_advances.items():
        c = ml.cursor(name)
        c.mark_delete(pos, c.properties)
    ml.delete_ledgers([it.ledger_id for it in p.items])
    return result


def trim_ledgers(
    ml: ManagedLedger,
    retention_time_ms: int | None = None,
    retention_size_mb: int | None = None,
    now_ms: int | None = None,
    dry_run: bool = False,
    truncate: bool = False,
) -> TrimResult:
    """Plans a retention pass and, unless ``dry_run``, executes it."""
    if not dry_run and ml.read_only:
        raise LifecycleError(f"managed ledger {ml.name!r} was opened read-only; use dry_run=True to plan")
    p = plan(ml, retention_time_ms, retention_size_mb, now_ms, truncate)
    return _result(ml, p, dry_run=True) if dry_run else execute(ml, p)


def apply_retention(
    ml: ManagedLedger,
    retention_time_minutes: int,
    retention_size_mb: int,
    now_ms: int | None = None,
    dry_run: bool = False,
) -> TrimResult:
    """Retention with the units of Pulsar's namespace policy (minutes, MB; -1 unlimited)."""
    check_policy("retention time", retention_time_minutes)
    ms = -1 if retention_time_minutes == -1 else retention_time_minutes * 60_000
    return trim_ledgers(ml, ms, retention_size_mb, now_ms, dry_run)


__all__ = ["TrimItem", "TrimPlan", "TrimResult", "apply_retention", "execute", "plan", "trim_ledgers"]
