"""What a data directory holds, as plain records: ledgers, cursors, topics, and the issues met
reading them; with their JSON and Arrow forms."""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from ..errors import PulsarkitError
from ..managed_ledger.ack_set import bitset_from_words
from ..managed_ledger.position import Position


class DataDirError(PulsarkitError):
    """A data directory could not be read (or, with ``strict``, part of it); names the file and offset."""

    def __init__(
        self, message: str, path: str | None = None, offset: int | None = None, reason: str | None = None
    ) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset
        #: The cause alone, without the file and offset the message starts with.
        self.reason = reason or message


@dataclass(frozen=True)
class Issue:
    """Bytes that could not be read: what, where (file and offset), and which entry if known."""

    kind: str
    #: The file holding the bytes (None: not known where it was found, as a read's issue before the
    #: reader places it: :func:`pulsarkit.analysis.messages.message_batches` does, by the entry)
    path: str | None
    offset: int | None
    message: str
    ledger_id: int | None = None
    entry_id: int | None = None
    #: Consecutive entries from ``entry_id`` this one issue stands for (a run of missing entries is
    #: one issue, however long: a forged ``lastEntryId`` must not make billions of them).
    count: int = 1

    def __str__(self) -> str:
        at = f" at offset {self.offset}" if self.offset is not None else ""
        ent = f" (ledger {self.ledger_id} entry {self.entry_id})" if self.ledger_id is not None else ""
        if self.ledger_id is not None and self.entry_id is not None and self.count > 1:
            last = self.entry_id + self.count - 1
            ent = f" (ledger {self.ledger_id} entries {self.entry_id}..{last}, {self.count} entries)"
        return f"{self.kind}: {self.path or '?'}{at}{ent}: {self.message}"

    def error(self) -> DataDirError:
        return DataDirError(str(self), self.path, self.offset)


def add_issue(issues: list[Issue], issue: Issue) -> None:
    """Appends ``issue``, or widens the last issue when this one continues its run: the same kind of
    unreadable entry of the same ledger, the next entry id, the same reason but for the entry id. A
    log lost under a ledger of millions of entries is one issue (the first entry's file and offset,
    and the count), not millions."""
    last = issues[-1] if issues else None
    if (
        last is not None
        and issue.kind == last.kind == "unreadable_entry"
        and issue.ledger_id is not None
        and issue.ledger_id == last.ledger_id
        and last.entry_id is not None
        and issue.entry_id == last.entry_id + last.count
        and _without(issue.message, issue.entry_id) == _without(last.message, last.entry_id)
    ):
        issues[-1] = dataclasses.replace(last, count=last.count + issue.count)
    else:
        issues.append(issue)


def _without(message: str, entry_id: int | None) -> str:
    return message.replace(f"entry {entry_id}", "entry #")


def held_pieces(held: list[int], first: int, last: int) -> list[tuple[int, int, bool]]:
    """``first..last`` cut into consecutive ``(a, b, is_held)`` pieces, alternating runs of the
    entry ids in ``held`` (sorted, distinct) and the gaps between them: as many pieces as the data has runs,
    whatever the range claims (a forged ``lastEntryId`` of 4·10^9 is one gap, not 4·10^9 entries). The runs
    are found column-wise (a ledger of 200 k unbatched entries: one run, no loop per entry)."""
    out: list[tuple[int, int, bool]] = []
    ids = np.asarray(held[bisect.bisect_left(held, first) : bisect.bisect_right(held, last)], dtype=np.int64)
    e = first
    if len(ids):
        cut = np.flatnonzero(np.diff(ids) != 1)  # the last id of every run but the final one
        ends = np.append(cut, len(ids) - 1)
        starts = np.insert(cut + 1, 0, 0)
        for a, b in zip(ids[starts].tolist(), ids[ends].tolist(), strict=True):
            if a > e:
                out.append((e, a - 1, False))
            out.append((a, b, True))
            e = b + 1
    if e <= last:
        out.append((e, last, False))
    return out


def missing_message(ledger_id: int, first: int, last: int, where: str = "on no bookie and in no journal") -> str:
    """The message of a run of missing entries (one entry: as a single read says it)."""
    if first == last:
        return f"ledger {ledger_id} entry {first} is {where}"
    return f"ledger {ledger_id} entries {first}..{last} ({last - first + 1} entries) are {where}"


@dataclass
class Ledger:
    """One ledger: what metadata says, what the bookie holds, and what it is for."""

    ledger_id: int
    kind: str
    #: Owning managed ledger (``tenant/ns/persistent/topic``), from custom metadata or the ML's list.
    managed_ledger: str | None = None
    topic: str | None = None
    cursor: str | None = None
    #: OPEN / IN_RECOVERY / CLOSED from metadata; DELETED when only the bookie knows it.
    state: str = "DELETED"
    metadata_last_entry_id: int | None = None
    digest_type: str | None = None
    password: bytes = b""
    custom_metadata: dict[str, bytes] = field(default_factory=dict)
    ctime: int | None = None
    #: When its managed ledger recorded it closed (``ManagedLedgerInfo.LedgerInfo.timestamp``, ms, the
    #: broker's clock); None for the open last ledger and for a ledger no managed ledger lists.
    closed_time: int | None = None
    #: Entries a reader gets: 0..last_entry_id (a closed ledger's last entry, or what recovery finds).
    last_entry_id: int = -1
    #: Entries the bookie holds (index, entry logs, journal replay).
    entries_on_bookie: int = 0
    #: Entries that only the journal holds (replayed as bookie recovery would).
    journal_only_entries: int = 0
    #: Bytes in entry logs (BookKeeper's accounting: record length + 4) plus journal-only records.
    bytes_on_bookie: int = 0
    #: Listed by its managed ledger (``ManagedLedgerInfo``) or cursor; False for leftovers.
    referenced: bool = False
    #: For a deleted ledger, what its first readable entry looks like (``topic``, ``cursor``,
    #: ``transaction_log_or_pending_ack``), or None.
    deleted_guess: str | None = None

    @property
    def entries(self) -> int:
        return self.last_entry_id + 1


@dataclass
class Cursor:
    """A durable subscription cursor as the broker would recover it."""

    name: str
    managed_ledger: str
    topic: str
    mark_delete: Position
    #: Individually deleted entries as open-closed ``(lo, hi]`` position ranges.
    individually_deleted: list[tuple[Position, Position]] = field(default_factory=list)
    #: Batch-index ack sets the broker recovers (``BitSet`` words, a set bit = message not yet
    #: acknowledged): those of a cursor ledger's ``PositionInfo``. ``ManagedCursorImpl.recover`` drops the
    #: ones of a ``ManagedCursorInfo`` snapshot (a cleanly closed cursor): see ``stored_batch_ack_sets``.
    batch_ack_sets: dict[Position, list[int]] = field(default_factory=dict)
    #: Every batch-index ack set stored, recovered by the broker or not.
    stored_batch_ack_sets: dict[Position, list[int]] = field(default_factory=dict)
    properties: dict[str, int] = field(default_factory=dict)
    cursor_properties: dict[str, str] = field(default_factory=dict)
    #: ``metadata`` (ManagedCursorInfo snapshot) or ``cursor_ledger`` (its last PositionInfo).
    source: str = "metadata"
    cursor_ledger_id: int = -1
    last_active: int | None = None
    system: bool = False
    note: str = ""

    def is_deleted(self, p: Position) -> bool:
        """True when the whole entry is acknowledged."""
        if p <= self.mark_delete:
            return True
        return any(lo < p <= hi for lo, hi in self.individually_deleted)

    def unacked_batch_indexes(self, p: Position, batch_size: int) -> list[int]:
        """Indexes of a batch still to deliver (all when no ack set was stored)."""
        words = self.batch_ack_sets.get(p)
        if words is None:
            return list(range(batch_size))
        bits = bitset_from_words(words)
        return [i for i in range(batch_size) if bits >> i & 1]


@dataclass
class Topic:
    """A topic (one managed ledger); partitions are topics named ``…-partition-N``."""

    name: str
    managed_ledger: str
    kind: str  # topic / transaction_log / pending_ack
    system: bool
    partition: int
    partitioned_topic: str | None
    ledgers: list[int]
    entries: int
    bytes: int
    cursors: list[Cursor]
    properties: dict[str, str]
    terminated: Position | None = None
    #: Compacted ledger and horizon (the ``__compaction`` mark-delete), when compacted.
    compacted_ledger: int | None = None
    compaction_horizon: Position | None = None


def LEDGERS_SCHEMA() -> Any:

    return pa.schema(
        [
            ("ledger_id", pa.int64()),
            ("kind", pa.string()),
            ("topic", pa.string()),
            ("managed_ledger", pa.string()),
            ("cursor", pa.string()),
            ("state", pa.string()),
            ("digest_type", pa.string()),
            ("metadata_last_entry_id", pa.int64()),
            ("entries", pa.int64()),
            ("entries_on_bookie", pa.int64()),
            ("journal_only_entries", pa.int64()),
            ("bytes_on_bookie", pa.int64()),
            ("referenced", pa.bool_()),
            ("deleted_guess", pa.string()),
            ("ctime", pa.int64()),
            ("custom_metadata", pa.map_(pa.string(), pa.string())),
        ]
    )


def cursor_dict(c: Cursor) -> dict[str, Any]:
    """A cursor as plain JSON-able data."""
    return {
        "name": c.name,
        "system": c.system,
        "mark_delete": str(c.mark_delete),
        "individually_deleted": [[str(lo), str(hi)] for lo, hi in c.individually_deleted],
        "batch_ack_sets": {str(p): w for p, w in sorted(c.batch_ack_sets.items())},
        "stored_batch_ack_sets": {str(p): w for p, w in sorted(c.stored_batch_ack_sets.items())},
        "properties": c.properties,
        "cursor_properties": c.cursor_properties,
        "source": c.source,
        "cursor_ledger_id": c.cursor_ledger_id,
        "last_active": c.last_active,
        **({"note": c.note} if c.note else {}),
    }


def topic_dict(t: Topic) -> dict[str, Any]:
    return {
        "topic": t.name,
        "managed_ledger": t.managed_ledger,
        "kind": t.kind,
        "system": t.system,
        "partition": t.partition,
        "partitioned_topic": t.partitioned_topic,
        "ledgers": t.ledgers,
        "entries": t.entries,
        "bytes": t.bytes,
        "properties": t.properties,
        "terminated": str(t.terminated) if t.terminated else None,
        "compacted_ledger": t.compacted_ledger,
        "compaction_horizon": str(t.compaction_horizon) if t.compaction_horizon else None,
        "cursors": [cursor_dict(c) for c in t.cursors],
    }


__all__ = [
    "LEDGERS_SCHEMA",
    "Cursor",
    "DataDirError",
    "Issue",
    "Ledger",
    "Position",
    "Topic",
    "cursor_dict",
    "topic_dict",
]
