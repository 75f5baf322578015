"""Message TTL, as the broker applies it to a subscription (``PersistentMessageExpiryMonitor``).

TTL acknowledges on a subscription's behalf, in two steps:

1. by ledger close time: walking the ledgers from the mark-delete ledger on, while a ledger is
   closed (``timestamp != 0``) and its close time has expired, the mark-delete may move to that
   ledger's last entry (capped at the last confirmed entry). No client clock is involved;
2. by entry time: ``OpFindNewest`` (check first, check last, then bisect with
   ``mid = min + max((max - min) / 2, 1)``) over the entries after the mark-delete position finds
   the newest expired entry. An entry's time is ``BrokerEntryMetadata.broker_timestamp`` when
   present, else ``MessageMetadata.publish_time``; it expired iff ``ttl != 0 and now > ts + ttl``.
   The mark-delete moves there, keeping the cursor's properties.

The shape is the one of every maintenance operation: :func:`plan` changes nothing and returns an
:class:`ExpiryPlan` (:mod:`pulsarkit.plan`; one :class:`ExpiryResult` per cursor, with the reason);
:func:`execute` re-checks each cursor against the plan (a cursor that moved refuses the plan with
:class:`~pulsarkit.errors.StalePlanError`) and acknowledges.
:func:`expire_messages` and :func:`apply_ttl` do both, or only plan with ``dry_run``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from ..errors import LifecycleError, StalePlanError
from ..managed_ledger.cursor import ManagedCursor
from ..managed_ledger.ledger import LedgerInfo, ManagedLedger
from ..managed_ledger.position import Position
from ..managed_ledger.trim import check_cursor
from ..plan import Plan, PlanItem
from .dedup import DEDUPLICATION_CURSOR_NAME
from .finder import EntrySpace, LedgerSpan, entry_matches, entry_timestamp, find_newest_matching


def is_entry_expired(ttl_seconds: int, entry_timestamp_ms: int, now_ms: int) -> bool:
    """``MessageImpl.isEntryExpired``."""
    return ttl_seconds != 0 and now_ms > entry_timestamp_ms + ttl_seconds * 1000


@dataclass(frozen=True)
class ExpiryResult(PlanItem):
    """What a TTL check did (or, with ``dry_run``, would do) to one cursor: the plan's item for it."""

    cursor: str
    ttl_seconds: int
    previous_mark_delete: Position
    mark_delete: Position
    #: Target of the ledger-close-time step, if any ledger qualified.
    by_ledger_close_time: Position | None
    #: Newest expired entry found by the entry-time search, if any.
    by_entry_time: Position | None
    #: Backlog entries acknowledged by this check.
    expired_entries: int
    dry_run: bool

    @property
    def reason(self) -> str:
        if self.mark_delete == self.previous_mark_delete:
            return f"nothing older than {self.ttl_seconds}s after the mark-delete"
        how = [
            f"ledgers closed more than {self.ttl_seconds}s ago up to {self.by_ledger_close_time}"
            if self.by_ledger_close_time is not None
            else "",
            f"entries older than {self.ttl_seconds}s up to {self.by_entry_time}" if self.by_entry_time else "",
        ]
        return "expired: " + "; ".join(h for h in how if h)


@dataclass(frozen=True)
class ExpiryPlan(Plan):
    """TTL over some cursors of one managed ledger, planned at ``now_ms`` (a :class:`~pulsarkit.plan.Plan`):
    one item per cursor; the state it was made on is each cursor's ``previous_mark_delete``."""

    KIND: ClassVar[str] = "ttl"

    managed_ledger: str
    ttl_seconds: int
    now_ms: int
    cursors: list[ExpiryResult] = field(default_factory=list)

    @property
    def items(self) -> list[ExpiryResult]:
        return self.cursors

    @property
    def created_ms(self) -> int:
        return self.now_ms

    @property
    def state(self) -> dict[str, Position]:
        return {r.cursor: r.previous_mark_delete for r in self.cursors}


def _check_ttl(ttl_seconds: int) -> None:
    if not isinstance(ttl_seconds, int) or isinstance(ttl_seconds, bool) or ttl_seconds < 0:
        raise LifecycleError(f"TTL must be a non-negative number of seconds, got {ttl_seconds!r}")


def _plan_cursor(cursor: ManagedCursor, ttl_seconds: int, now: int) -> ExpiryResult:
    ml = cursor.ml
    check_cursor(ml, cursor)
    before = cursor.mark_delete_position
    target = before

    # 1. whole ledgers by close time
    by_close: Position | None = None
    if ttl_seconds > 0:
        last: LedgerInfo | None = None
        for li in ml.ledgers():
            if li.ledger_id < before.ledger_id:
                continue
            if li.timestamp == 0 or not is_entry_expired(ttl_seconds, li.timestamp, now):
                break
            last = li
        if last is not None:
            by_close = min(Position(last.ledger_id, last.entries - 1), ml.last_confirmed_entry)
            if by_close >= target:  # a position already acknowledged is a quiet no-op, as in Pulsar
                target = cursor.acknowledged_position(by_close)

    # 2. newest expired entry after the (possibly moved) mark-delete (OpFindNewest, SearchActiveEntries)
    by_time: Position | None = None
    n = ml.count_entries(target, ml.last_confirmed_entry)
    if n > 0:
        space = EntrySpace([LedgerSpan(li.ledger_id, li.entries, li.timestamp) for li in ml.ledgers()])
        start = space.index_of(*ml.next_valid_position(target))
        end = min(start + n - 1, space.size - 1)

        def expired(k: int) -> bool:
            data = ml.read_entry(Position(*space.at(k)))
            return entry_matches(data, lambda d: is_entry_expired(ttl_seconds, entry_timestamp(d), now))

        found = find_newest_matching(space, start, end, expired)
        if found is not None:
            by_time = Position(*space.at(found))
            if by_time >= target:
                target = cursor.acknowledged_position(by_time)

    expired_entries = cursor.number_of_entries_in_backlog - cursor.backlog_after(target)
    return ExpiryResult(cursor.name, ttl_seconds, before, target, by_close, by_time, expired_entries, True)


def plan(
    ml: ManagedLedger, ttl_seconds: int, now_ms: int | None = None, cursors: list[ManagedCursor] | None = None
) -> ExpiryPlan:
    """TTL planned for ``cursors`` (default: every subscription; the deduplication cursor
    ``pulsar.dedup`` is not one, TTL never moves it). Changes nothing."""
    _check_ttl(ttl_seconds)
    ml.check_open()
    now = ml.now() if now_ms is None else int(now_ms)
    if cursors is None:
        cursors = [c for c in ml.cursors() if c.name != DEDUPLICATION_CURSOR_NAME]
    return ExpiryPlan(ml.name, ttl_seconds, now, [_plan_cursor(c, ttl_seconds, now) for c in cursors])


def execute(ml: ManagedLedger, p: ExpiryPlan) -> list[ExpiryResult]:
    """Acknowledges what the plan says. Every cursor is checked first: one that moved since the plan
    was made (or is gone) refuses the whole plan, with nothing done."""
    if p.managed_ledger != ml.name:
        raise LifecycleError(f"the plan is for {p.managed_ledger!r}, not {ml.name!r}")
    ml.check_mutable()
    for r in p.cursors:
        c = ml.cursor(r.cursor)
        if c.mark_delete_position != r.previous_mark_delete:
            raise StalePlanError(
                f"cursor {r.cursor!r} of {ml.name!r} moved to {c.mark_delete_position} since the TTL plan "
                f"(made at {r.previous_mark_delete}); plan again"
            )
    done = []
    for r in p.cursors:
        if r.mark_delete > r.previous_mark_delete:
            c = ml.cursor(r.cursor)
            c.mark_delete(r.mark_delete, c.properties)
        done.append(
            ExpiryResult(
                r.cursor,
                r.ttl_seconds,
                r.previous_mark_delete,
                r.mark_delete,
                r.by_ledger_close_time,
                r.by_entry_time,
                r.expired_entries,
                False,
            )
        )
    return done


def expire_messages(
    cursor: ManagedCursor, ttl_seconds: int, now_ms: int | None = None, dry_run: bool = False
) -> ExpiryResult:
    """Applies message TTL to one durable cursor (both steps above)."""
    p = plan(cursor.ml, ttl_seconds, now_ms, [cursor])
    return p.cursors[0] if dry_run else execute(cursor.ml, p)[0]


def apply_ttl(
    ml: ManagedLedger, ttl_seconds: int, now_ms: int | None = None, dry_run: bool = False
) -> list[ExpiryResult]:
    """TTL on every subscription of a managed ledger, as the broker checks each one."""
    p = plan(ml, ttl_seconds, now_ms)
    return p.cursors if dry_run else execute(ml, p)


__all__ = [
    "ExpiryPlan",
    "ExpiryResult",
    "apply_ttl",
    "execute",
    "expire_messages",
    "is_entry_expired",
    "plan",
]
