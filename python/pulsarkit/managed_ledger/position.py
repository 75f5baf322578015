"""Managed-ledger positions (``PositionImpl``) and sets of position ranges."""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from typing import NamedTuple, TypeAlias

from ..errors import InvalidCursorPositionError

LONG_MAX = 2**63 - 1


class Position(NamedTuple):
    """A managed-ledger position ``(ledger_id, entry_id)``, ordered like ``PositionImpl``."""

    ledger_id: int
    entry_id: int

    def next(self) -> Position:
        return Position(self.ledger_id, self.entry_id + 1)

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


Position.EARLIEST = Position(-1, -1)  # type: ignore[attr-defined]
Position.LATEST = Position(LONG_MAX, LONG_MAX)  # type: ignore[attr-defined]


def message_id_text(ledger_id: int, entry_id: int, batch_index: int = -1, partition: int = -1) -> str:
    """A message id as Pulsar's clients print it: ``ledger:entry:partition`` (``MessageIdImpl.toString``), with
    ``:batch`` after it for a message of a batch (``BatchMessageIdImpl``); partition -1 outside a partitioned
    topic's consumer. Every command's human-readable message id is this one."""
    text = f"{ledger_id}:{entry_id}:{partition}"
    return text if batch_index < 0 else f"{text}:{batch_index}"


_MESSAGE_ID = re.compile(r"([0-9]+):([0-9]+)(?::(-1|[0-9]+)(?::([0-9]+))?)?")


def parse_message_id(text: str) -> tuple[int, int, int, int]:
    """``(ledger, entry, partition, batch_index)`` of Pulsar's printed forms (:func:`message_id_text`):
    ``LEDGER:ENTRY:PARTITION``, ``LEDGER:ENTRY:PARTITION:BATCH``, and ``LEDGER:ENTRY`` (an entry); partition
    and batch -1 when not given. Three numbers are Pulsar's ledger, entry and partition, never a batch index
    (the two readings would collide). Anything else is a ValueError."""
    m = _MESSAGE_ID.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"a message id is LEDGER:ENTRY[:PARTITION[:BATCH]] (as Pulsar prints it), not {text!r}")
    ledger, entry, partition, batch = m.groups()
    return int(ledger), int(entry), int(partition or -1), int(batch or -1)


#: What the managed ledger and its cursors accept as a position: a :class:`Position` or a
#: ``(ledger_id, entry_id)`` pair.
PositionLike: TypeAlias = Position | tuple[int, int]


def as_position(p: PositionLike) -> Position:
    if isinstance(p, Position):
        return p
    try:
        lid, eid = p
        return Position(int(lid), int(eid))
    except (TypeError, ValueError):
        raise InvalidCursorPositionError(f"not a position: {p!r}") from None


class PositionRangeSet:
    """Merged open-closed position ranges ``(lo, hi]`` (Guava ``RangeSet`` semantics): a cursor's
    individually deleted entries."""

    __slots__ = ("ranges",)

    def __init__(self) -> None:
        self.ranges: list[tuple[Position, Position]] = []

    def add(self, lo: Position, hi: Position) -> None:
        if hi <= lo:
            return
        keep, nlo, nhi = [], lo, hi
        for a, b in self.ranges:
            if a <= nhi and nlo <= b:  # connected (overlapping or touching)
                nlo, nhi = min(a, nlo), max(b, nhi)
            else:
                keep.append((a, b))
        bisect.insort(keep, (nlo, nhi))
        self.ranges = keep

    def contains(self, p: Position) -> bool:
        return self.range_containing(p) is not None

    def range_containing(self, p: Position) -> tuple[Position, Position] | None:
        i = bisect.bisect_left(self.ranges, (p,)) - 1
        for j in (i, i + 1):
            if 0 <= j < len(self.ranges):
                a, b = self.ranges[j]
                if a < p <= b:
                    return a, b
        return None

    def remove_at_most(self, p: Position) -> None:
        out = []
        for a, b in self.ranges:
            if b <= p:
                continue
            out.append((max(a, p), b))
        self.ranges = out

    def clear(self) -> None:
        self.ranges = []

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __iter__(self) -> Iterator[tuple[Position, Position]]:
        return iter(list(self.ranges))


__all__ = ["LONG_MAX", "Position", "PositionRangeSet", "as_position"]
