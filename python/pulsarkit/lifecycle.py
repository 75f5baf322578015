"""Message TTL and retention, as the broker applies them to a managed ledger.

TTL (``PersistentMessageExpiryMonitor.expireMessages``) acknowledges on a subscription's behalf:

1. by ledger close time: walking the ledgers from the mark-delete ledger on, while a ledger is
   closed (``timestamp != 0``) and its close time has expired, the mark-delete may move to that
   ledger's last entry (capped at the last confirmed entry). No client clock is involved;
2. by entry time: ``OpFindNewest`` (check first, check last, then bisect with
   ``mid = min + max((max - min) / 2, 1)``) over the entries after the mark-delete position finds
   the newest expired entry. An entry's time is ``BrokerEntryMetadata.broker_timestamp`` when
   present, else ``MessageMetadata.publish_time``; it expired iff ``ttl != 0 and now > ts + ttl``.
   The mark-delete moves there, keeping the cursor's properties.

Retention (``ManagedLedgerImpl.internalTrimLedgers``) deletes whole ledgers that every durable
cursor has consumed: below the slowest mark-delete ledger (the ledger itself too when the
mark-delete is its last entry and it is not the current ledger; every ledger but the current one
when there are no durable cursors), oldest first, each while ``expired`` (``time >= 0 and
now - closeTime > time``) or ``over quota`` (``size >= 0 and totalSize - sizeDeletedSoFar >= size``,
the ledger's own size included), stopping at the first that is neither. -1 is unlimited; 0 deletes
consumed ledgers at once. The current ledger is never deleted. Deleted ledgers leave the
managed-ledger metadata first, then lose their BookKeeper metadata and bookie index.

Both take ``dry_run=True`` to report without changing anything, and refuse (:class:`LifecycleError`)
inputs that disagree with each other: negative policies other than -1, a cursor past the last
entry, or a ledger to delete whose metadata names another managed ledger or is still open.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from .errors import LedgerNotFoundError, LifecycleError, PulsarkitError
from .finder import EntrySpace, LedgerSpan, entry_timestamp, find_newest_matching
from .managed_ledger import MB, LedgerInfo, ManagedCursor, ManagedLedger, Position
from .proto import LedgerMetadataFormat


def is_entry_expired(ttl_seconds: int, entry_timestamp_ms: int, now_ms: int) -> bool:
    """``MessageImpl.isEntryExpired``."""
    return ttl_seconds != 0 and now_ms > entry_timestamp_ms + ttl_seconds * 1000


@dataclass(frozen=True)
class ExpiryResult:
    """What a TTL check did (or, with ``dry_run``, would do) to one cursor."""

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


# -------------------------------------------------------------------------------------- TTL


def _check_cursor(ml: ManagedLedger, cursor: ManagedCursor) -> None:
    if cursor.ml is not ml:
        raise LifecycleError(f"cursor {cursor.name!r} belongs to {cursor.ml.name!r}, not {ml.name!r}")
    lac = ml.last_confirmed_entry
    if cursor.mark_delete_position > lac:
        raise LifecycleError(
            f"cursor {cursor.name!r} of {ml.name!r}: mark-delete {cursor.mark_delete_position} is past the last entry {lac}")


def _shadow(cursor: ManagedCursor) -> ManagedCursor:
    """A detached copy of a cursor's state, for dry runs (never persisted)."""
    c = copy.copy(cursor)
    c._ranges = copy.deepcopy(cursor._ranges)
    c._batch = dict(cursor._batch)
    c._properties = dict(cursor._properties)
    return c


def expire_messages(cursor: ManagedCursor, ttl_seconds: int, now_ms: int | None = None,
                    dry_run: bool = False) -> ExpiryResult:
    """Applies message TTL to one durable cursor (both steps above)."""
    if not isinstance(ttl_seconds, int) or isinstance(ttl_seconds, bool) or ttl_seconds < 0:
        raise LifecycleError(f"TTL must be a non-negative number of seconds, got {ttl_seconds!r}")
    ml = cursor.ml
    ml._check_open()
    _check_cursor(ml, cursor)
    now = ml._clock() if now_ms is None else int(now_ms)
    target = _shadow(cursor) if dry_run else cursor
    before_md = cursor.mark_delete_position
    before_backlog = cursor.number_of_entries_in_backlog

    def acknowledge(pos: Position) -> None:
        if pos < target.mark_delete_position:
            return  # Pulsar's mark-delete fails quietly for a position already acknowledged
        if dry_run:
            target._set_acknowledged(pos)
            target._properties = dict(target._properties)
        else:
            target.mark_delete(pos, target.properties)

    # 1. whole ledgers by close time
    by_close: Position | None = None
    if ttl_seconds > 0:
        md_ledger = target.mark_delete_position.ledger_id
        last: LedgerInfo | None = None
        for li in ml.ledgers():
            if li.ledger_id < md_ledger:
                continue
            if li.timestamp == 0 or not is_entry_expired(ttl_seconds, li.timestamp, now):
                break
            last = li
        if last is not None:
            by_close = Position(last.ledger_id, last.entries - 1)
            lac = ml.last_confirmed_entry
            by_close = min(by_close, lac)
            acknowledge(by_close)

    # 2. newest expired entry after the mark-delete position (OpFindNewest, SearchActiveEntries)
    by_time: Position | None = None
    md = target.mark_delete_position
    n = ml.count_entries(md, ml.last_confirmed_entry)
    if n > 0:
        spans = [LedgerSpan(li.ledger_id, li.entries, li.timestamp) for li in ml.ledgers()]
        space = EntrySpace(spans)
        start_pos = ml.next_valid_position(md)
        start = space.index_of(*start_pos)
        end = min(start + n - 1, space.size - 1)

        def expired(k: int) -> bool:
            try:
                ts = entry_timestamp(ml._read_payload(Position(*space.at(k))))
            except PulsarkitError:
                return False  # an entry that does not parse never counts as expired, as in Pulsar
            return is_entry_expired(ttl_seconds, ts, now)

        found = find_newest_matching(space, start, end, expired)
        if found is not None:
            by_time = Position(*space.at(found))
            acknowledge(by_time)

    after_backlog = target.number_of_entries_in_backlog
    return ExpiryResult(cursor.name, ttl_seconds, before_md, target.mark_delete_position, by_close, by_time,
                        before_backlog - after_backlog, dry_run)


def apply_ttl(ml: ManagedLedger, ttl_seconds: int, now_ms: int | None = None, dry_run: bool = False) -> list[ExpiryResult]:
    """TTL on every subscription of a managed ledger, as the broker checks each one. The
    deduplication cursor (``pulsar.dedup``) is not a subscription: TTL never moves it."""
    from .dedup import DEDUPLICATION_CURSOR_NAME

    return [expire_messages(c, ttl_seconds, now_ms, dry_run) for c in ml.cursors() if c.name != DEDUPLICATION_CURSOR_NAME]


# -------------------------------------------------------------------------------- retention


def _check_policy(name: str, v: int) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < -1:
        raise LifecycleError(f"{name} must be -1 (unlimited), 0 or positive, got {v!r}")
    return v


def trim_ledgers(ml: ManagedLedger, retention_time_ms: int | None = None, retention_size_mb: int | None = None,
                 now_ms: int | None = None, dry_run: bool = False, truncate: bool = False) -> TrimResult:
    """One retention pass over a managed ledger. Policies default to the managed ledger's config."""
    time_ms = _check_policy("retention time", ml.config.retention_time_ms if retention_time_ms is None else retention_time_ms)
    size_mb = _check_policy("retention size", ml.config.retention_size_mb if retention_size_mb is None else retention_size_mb)
    ml._check_open()
    if ml.read_only:
        raise LifecycleError(f"managed ledger {ml.name!r} was opened read-only; use dry_run=True to plan")
    now = ml._clock() if now_ms is None else int(now_ms)
    infos = ml.ledgers()
    if not infos:
        return TrimResult(ml.name, [], {}, -1, ml.total_size, ml.total_size, time_ms, size_mb, dry_run)
    current = ml.current_ledger_id if ml.current_ledger_id is not None else infos[-1].ledger_id
    by_id = {li.ledger_id: li for li in infos}
    cursors = ml.cursors()
    for c in cursors:
        _check_cursor(ml, c)

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
    to_delete: list[LedgerInfo] = []
    reasons: dict[int, str] = {}
    size_to_delete = 0
    for li in infos:
        if li.ledger_id >= slowest or li.ledger_id == current:
            break
        if truncate:
            to_delete.append(li)
            reasons[li.ledger_id] = "truncate"
            continue
        size_to_delete += li.size
        over = size_mb >= 0 and total - size_to_delete >= size_mb * MB
        expired = time_ms >= 0 and now - li.timestamp > time_ms
        if expired or over:
            to_delete.append(li)
            reasons[li.ledger_id] = "+".join(r for r, ok in (("expired", expired), ("over_quota", over)) if ok)
        else:
            break

    # refuse to delete ledgers whose BookKeeper metadata disagrees with the managed ledger
    for li in to_delete:
        try:
            lmd, _ = ml._md.ledger_metadata(li.ledger_id)
        except LedgerNotFoundError:
            continue  # already gone from BookKeeper; dropping it from the list is what Pulsar does
        owner = next((e.value.decode("utf-8", "replace") for e in lmd.customMetadata if e.key == "pulsar/managed-ledger"), None)
        if owner is not None and owner != ml.name:
            raise LifecycleError(f"ledger {li.ledger_id} is listed by {ml.name!r} but its metadata names {owner!r}")
        if lmd.state != LedgerMetadataFormat.CLOSED:
            raise LifecycleError(f"ledger {li.ledger_id} of {ml.name!r} is not the current ledger but is still open in BookKeeper")

    size_after = total - sum(li.size for li in to_delete)
    advanced: dict[str, Position] = {}
    highest = next((Position(li.ledger_id, li.entries - 1) for li in reversed(to_delete) if li.entries > 0), None)
    if highest is not None:
        lac = ml.last_confirmed_entry
        for c in cursors:
            if highest > c.mark_delete_position and highest <= lac:
                advanced[c.name] = highest
    result = TrimResult(ml.name, to_delete, reasons, slowest, total, size_after, time_ms, size_mb, dry_run, advanced)
    if dry_run or not to_delete:
        return result

    for name, pos in advanced.items():
        c = ml.cursor(name)
        c.mark_delete(pos, c.properties)
    ml._drop_ledgers([li.ledger_id for li in to_delete])
    return result


def apply_retention(ml: ManagedLedger, retention_time_minutes: int, retention_size_mb: int,
                    now_ms: int | None = None, dry_run: bool = False) -> TrimResult:
    """Retention with the units of Pulsar's namespace policy (minutes, MB; -1 unlimited)."""
    _check_policy("retention time", retention_time_minutes)
    ms = -1 if retention_time_minutes == -1 else retention_time_minutes * 60_000
    return trim_ledgers(ml, ms, retention_size_mb, now_ms, dry_run)


__all__ = [
    "ExpiryResult",
    "TrimResult",
    "apply_retention",
    "apply_ttl",
    "expire_messages",
    "is_entry_expired",
    "trim_ledgers",
]

