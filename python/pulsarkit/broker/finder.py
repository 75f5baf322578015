"""Seek by publish time and by index over a managed ledger, the way the broker does it:
``PersistentMessageFinder`` (predicate ``entry timestamp < T``, OpFindNewest's binary search, the
PIP-345 ledger-close-time narrowing) and ``getMessageIdByIndex`` (``BrokerEntryMetadata.index < i``)."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .. import _native
from ..codec.entry import Buffer, Entry
from ..errors import PulsarkitError

#: ``managedLedgerCursorResetLedgerCloseTimestampMaxClockSkewMillis`` default; -1 disables narrowing.
DEFAULT_MAX_CLOCK_SKEW_MS = 60_000


class LedgerSpan(NamedTuple):
    ledger_id: int
    entries: int
    #: Close time in ms; 0 for the open (current) ledger.
    timestamp: int


@dataclass(frozen=True)
class EntrySpace:
    """The readable entries of a managed ledger as one ordered sequence of positions."""

    ledgers: Sequence[LedgerSpan]
    # Derived by __post_init__: the ledgers with entries, where each starts in the sequence, its length.
    _live: list[LedgerSpan] = field(init=False, repr=False, compare=False)
    _starts: list[int] = field(init=False, repr=False, compare=False)
    size: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        live = [l for l in self.ledgers if l.entries > 0]
        object.__setattr__(self, "_live", live)
        starts, total = [], 0
        for l in live:
            starts.append(total)
            total += l.entries
        object.__setattr__(self, "_starts", starts)
        object.__setattr__(self, "size", total)

    def at(self, k: int) -> tuple[int, int]:
        i = bisect_right(self._starts, k) - 1
        l = self._live[i]
        return l.ledger_id, k - self._starts[i]

    def index_of(self, ledger_id: int, entry_id: int) -> int:
        for start, l in zip(self._starts, self._live):
            if l.ledger_id == ledger_id:
                return start + min(entry_id, l.entries - 1)
        raise KeyError(f"ledger {ledger_id} holds no readable entries")

    def next_position(self, k: int) -> tuple[int, int]:
        """The position after entry k (the next write position when k is the last entry)."""
        if k + 1 < self.size:
            return self.at(k + 1)
        ledger_id, entry_id = self.at(k)
        return ledger_id, entry_id + 1

    def first_position(self) -> tuple[int, int] | None:
        return self.at(0) if self.size else None


def entry_timestamp(data: Buffer) -> int:
    """``Entry.getEntryTimestamp``: broker timestamp if recorded, else the client's publish time."""
    return Entry.parse(data, verify_checksum=False).entry_timestamp


def entry_index(data: Buffer) -> int | None:
    """The entry's broker index (index of its last message), or None."""
    r = _native.peek_broker_entry_metadata(data)
    return None if r is None else r[1]


def entry_matches(data: Buffer, test: Callable[[Buffer], bool]) -> bool:
    """A finder's predicate on one entry read: ``test(data)``, False when the entry does not parse
    (``PersistentMessageFinder`` logs it and returns false), so one bad entry does not fail the find.
    A failed read is not caught: it fails the find, as in Pulsar."""
    try:
        return test(data)
    except PulsarkitError:
        return False


def find_newest_matching(space: EntrySpace, start: int, end: int, matches: Callable[[int], bool]) -> int | None:
    """OpFindNewest over entries ``start..end`` (inclusive indexes into ``space``): the last entry for
    which ``matches`` holds, probing in the broker's order (first, last, then bisection with
    ``mid = min + max((max - min) // 2, 1)``), so results agree with Pulsar even when the predicate
    is not monotone."""
    if end < start:
        return None
    if not matches(start):
        return None
    last_matched = start
    n = end - start + 1
    if matches(start + min(n, end - start)):
        return start + min(n, end - start)
    lo, hi = 0, n

    def mid() -> int:
        return lo + max((hi - lo) // 2, 1)

    while True:
        m = mid()
        k = start + min(m, end - start)
        if matches(k):
            last_matched = k
            lo = m
        else:
            hi = m - 1
        if hi <= lo:
            return last_matched


def find_position_range(
    ledgers: Sequence[LedgerSpan], target_ms: int, max_clock_skew_ms: int = DEFAULT_MAX_CLOCK_SKEW_MS
) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """PIP-345 narrowing by ledger close time: start = last entry of the newest ledger closed at or
    before ``T - skew``; end = last entry of the first ledger closed after ``T + skew`` (None once the
    open ledger is reached). ``(None, None)`` when narrowing is disabled (skew < 0)."""
    if max_clock_skew_ms < 0:
        return None, None
    start = end = None
    for l in ledgers:
        if l.timestamp == 0:
            break
        if l.entries > 0 and l.timestamp <= target_ms - max_clock_skew_ms:
            start = (l.ledger_id, l.entries - 1)
        elif l.timestamp > target_ms + max_clock_skew_ms:
            if l.entries > 0:
                end = (l.ledger_id, l.entries - 1)
                break
    return start, end


def find_position_by_time(
    ledgers: Sequence[LedgerSpan],
    read_entry: Callable[[int, int], Buffer],
    publish_time_ms: int,
    max_clock_skew_ms: int = DEFAULT_MAX_CLOCK_SKEW_MS,
) -> tuple[int, int] | None:
    """Where a cursor is reset for ``seek(publish_time)``: the position after the newest entry whose
    timestamp is ``< T``; the first position when none is; None for an empty ledger."""
    space = EntrySpace(ledgers)
    if space.size == 0:
        return None
    lo_pos, hi_pos = find_position_range(ledgers, publish_time_ms, max_clock_skew_ms)
    start = space.index_of(*lo_pos) if lo_pos else 0
    end = space.index_of(*hi_pos) if hi_pos else space.size - 1

    def earlier(k: int) -> bool:
        return entry_matches(read_entry(*space.at(k)), lambda d: entry_timestamp(d) < publish_time_ms)

    found = find_newest_matching(space, start, end, earlier)
    return space.first_position() if found is None else space.next_position(found)


def find_position_by_index(
    ledgers: Sequence[LedgerSpan], read_entry: Callable[[int, int], Buffer], index: int
) -> tuple[int, int] | None:
    """The entry holding the message with broker index ``index``: the position after the newest entry
    whose index is ``< index`` (``getMessageIdByIndex``); the first position when none is."""
    space = EntrySpace(ledgers)
    if space.size == 0:
        return None

    def below(k: int) -> bool:
        def test(data: Buffer) -> bool:
            i = entry_index(data)
            return i is not None and i < index

        return entry_matches(read_entry(*space.at(k)), test)

    found = find_newest_matching(space, 0, space.size - 1, below)
    return space.first_position() if found is None else space.next_position(found)
