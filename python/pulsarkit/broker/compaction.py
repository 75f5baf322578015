"""Topic compaction as Pulsar's two-phase compactor does it, and the compacted view it serves.

:class:`Compactor` plans, then executes (the shape of :mod:`pulsarkit.plan`). :meth:`Compactor.plan`
reads the topic as the ``__compaction`` subscription sees it (the previous compacted ledger below the
horizon, then the topic after it) and builds the latest message per key (phase one, one native call
per batch of entries): a :class:`CompactionPlan`, nothing written (a dry run is that plan).
:meth:`Compactor.execute` re-checks that the topic has not changed, then writes a new compacted ledger
with only those messages (phase two: batches rebatched with placeholders and PIP-429
``compacted_batch_indexes``). Only then does the ``__compaction`` cursor move: its mark-delete is the
new horizon, with the ledger id in its ``CompactedTopicLedger`` property; the previous compacted
ledger is deleted last. A run that fails deletes the ledger it was writing and leaves the old state as it was.

:class:`CompactedTopic` is ``CompactedTopicImpl`` with ``PulsarTopicCompactionService``'s answers: reads
through the compacted view (``find_start_point``), seek by publish time and by broker index, and the
last message id a ``readCompacted`` reader gets (PIP-429).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import pyarrow as pa

from .. import _native
from ..codec.entry import Entry
from ..errors import CursorNotFoundError, LifecycleError, StalePlanError
from ..managed_ledger.ledger_handle import LedgerHandle
from ..managed_ledger.position import Position
from ..plan import Plan, PlanItem
from ..proto import MessageIdData
from .topic_name import COMPACTED_LEDGER_PROPERTY, COMPACTION_CURSOR, ml_to_topic

#: Entries per native call.
READ_BATCH = 1000


class MessagePosition(NamedTuple):
    """PIP-429's ``MessagePosition``: a message's entry, its batch index (-1 outside a batch) and the
    entry's publish time."""

    ledger_id: int
    entry_id: int
    batch_index: int
    publish_time: int


EARLIEST = MessagePosition(-1, -1, 0, 0)


def compacted_ledger_metadata(topic: str, compacted_to: Position) -> dict[str, bytes]:
    """``LedgerMetadataUtils.buildMetadataForCompactedLedger``: ``compactedTo`` is the serialized
    ``MessageIdData`` of the last message read (as ``MessageIdImpl.toByteArray``)."""
    to = MessageIdData(ledgerId=compacted_to.ledger_id, entryId=compacted_to.entry_id, batch_size=0)
    return {
        "application": b"pulsar",
        "component": b"compacted-ledger",
        "pulsar/compactedTopic": topic.encode(),
        "pulsar/compactedTo": to.SerializeToString(),
    }


@dataclass(frozen=True)
class CompactionResult:
    """What a run did. ``ledger_id`` is None when there was nothing new to compact."""

    ledger_id: int | None
    horizon: Position | None
    previous_ledger_id: int | None
    keys: int
    tombstones: int
    messages_read: int
    entries_written: int


@dataclass(frozen=True)
class CompactionOptions:
    """The compactor's settings, the broker's: a plan records those it was made with, and its execution must
    have the same."""

    #: ``topicCompactionRetainNullKey`` (false since Pulsar 3.2).
    retain_null_key: bool = False
    #: ``EventTimeOrderCompactor`` instead of the default publishing order.
    event_time_order: bool = False
    #: PIP-429's smaller batches (only the retained messages): unreadable by clients that predate it.
    retained_only: bool = False
    #: The topic's partition, written into each raw message's id (-1: not partitioned).
    partition: int = -1


@dataclass(frozen=True)
class CompactionItem(PlanItem):
    """A ledger range phase two reads (``action`` ``read``; the previous compacted ledger, then the
    topic after the horizon), or the previous compacted ledger it deletes (``delete``)."""

    action: str
    ledger_id: int
    first_entry: int
    last_entry: int
    reason: str


@dataclass(frozen=True)
class CompactionPlan(Plan):
    """One topic compaction, planned: what phase one found (``keys`` kept, ``tombstones``, messages
    read up to the new ``horizon``: None when nothing is new) and what phase two reads and deletes."""

    KIND: ClassVar[str] = "topic-compaction"

    managed_ledger: str
    topic: str
    horizon: Position | None
    previous_horizon: Position | None
    previous_ledger_id: int | None
    keys: int
    tombstones: int
    messages_read: int
    items: list[CompactionItem]
    options: CompactionOptions
    created_ms: int
    #: The topic the plan was made on: last entry, ledgers, the compaction horizon and ledger.
    state: dict[str, Any] = field(default_factory=dict)


def _chunks(rows: Iterator[tuple[int, int, bytes]]) -> Iterator[tuple[Any, Any, Any]]:
    buf: list[tuple[int, int, bytes]] = []
    for r in rows:
        buf.append(r)
        if len(buf) >= READ_BATCH:
            yield _arrays(buf)
            buf = []
    if buf:
        yield _arrays(buf)


def _arrays(buf: list[tuple[int, int, bytes]]) -> tuple[Any, Any, Any]:
    return (
        pa.array([b for _, _, b in buf], pa.binary()),
        pa.array([lid for lid, _, _ in buf], pa.int64()),
        pa.array([eid for _, eid, _ in buf], pa.int64()),
    )


class Compactor:
    """Compacts one topic's managed ledger on a store (see the module docstring)."""

    def __init__(
        self,
        factory: Any,
        ml: Any,
        options: CompactionOptions | None = None,
    ) -> None:
        self.factory = factory
        self.ml = ml
        self.topic = ml_to_topic(ml.name)
        #: The settings a plan records, which its execution must have too.
        self.options = options or CompactionOptions()
        #: The last plan made here and its phase one, so executing it reads the topic only once more.
        self._planned: tuple[CompactionPlan, Any, CompactedTopic] | None = None

    def view(self) -> CompactedTopic:
        return CompactedTopic.open(self.factory, self.ml)

    def _source(self, view: CompactedTopic, last: Position) -> Iterator[tuple[int, int, bytes]]:
        """What the ``__compaction`` reader reads: the compacted view from the start, up to ``last``."""
        for pos, data in view.read_entries():
            if pos > last:
                return
            yield pos.ledger_id, pos.entry_id, data

    def _state(self) -> dict[str, Any]:
        """What a plan is made on, read afresh: the topic's last entry and ledgers, and the
        ``__compaction`` cursor (its mark-delete, the horizon, and its compacted-ledger property)."""
        try:
            cursor = self.ml.cursor(COMPACTION_CURSOR)
            compaction: Any = [list(cursor.mark_delete_position), cursor.properties.get(COMPACTED_LEDGER_PROPERTY)]
        except CursorNotFoundError:
            compaction = None
        return {
            "last_confirmed_entry": list(self.ml.last_confirmed_entry),
            "ledgers": [[li.ledger_id, li.entries] for li in self.ml.ledgers()],
            "compaction_cursor": compaction,
        }

    def _phase_one(self, view: CompactedTopic, last: Position) -> Any:
        latest = _native.LatestForKey(self.options.event_time_order)
        for entries, lids, eids in _chunks(self._source(view, last)):
            latest.add_entries(entries, lids, eids)
        return latest

    def plan(self, now_ms: int | None = None) -> CompactionPlan:
        """Phase one, nothing written: the latest message per key up to the last entry (the new
        horizon), and what phase two reads, writes and deletes. A dry run is this plan alone."""
        view = self.view()
        previous = view.compacted_ledger_id
        last = self.ml.last_confirmed_entry
        state = self._state()
        now = self.ml.now() if now_ms is None else int(now_ms)
        options = self.options
        if last.entry_id < 0 or (view.horizon is not None and last <= view.horizon):
            return CompactionPlan(
                self.ml.name, self.topic, None, view.horizon, previous, 0, 0, 0, [], options, now, state
            )
        latest = self._phase_one(view, last)
        items = []
        if previous is not None and view.horizon is not None:
            items.append(
                CompactionItem(
                    "read", previous, 0, len(view._ids) - 1, f"the compacted ledger up to the horizon {view.horizon}"
                )
            )
        after = view.horizon if view.horizon is not None else Position(-1, -1)
        for li in self.ml.ledgers():
            first = after.entry_id + 1 if li.ledger_id == after.ledger_id else 0
            end = li.entries - 1 if li.ledger_id != last.ledger_id else last.entry_id
            if li.ledger_id < after.ledger_id or li.ledger_id > last.ledger_id or first > end:
                continue
            items.append(CompactionItem("read", li.ledger_id, first, end, "topic entries after the horizon"))
        if previous is not None:
            items.append(CompactionItem("delete", previous, -1, -1, "replaced by the new compacted ledger"))
        p = CompactionPlan(
            self.ml.name,
            self.topic,
            last,
            view.horizon,
            previous,
            len(latest),
            latest.tombstones,
            latest.messages,
            items,
            options,
            now,
            state,
        )
        self._planned = (p, latest, view)
        return p

    def execute(self, plan: CompactionPlan) -> CompactionResult:
        """Phase two: writes the compacted ledger the plan describes, moves the ``__compaction`` cursor
        to its horizon, deletes the previous compacted ledger. A topic that changed since the plan (an
        entry added, a ledger trimmed, another compaction) refuses it with :class:`StalePlanError`,
        nothing written."""
        if plan.managed_ledger != self.ml.name:
            raise LifecycleError(f"the compaction plan is for {plan.managed_ledger!r}, not {self.ml.name!r}")
        options = self.options
        if plan.options != options:
            raise LifecycleError(f"the compaction plan was made with {plan.options}, this compactor has {options}")
        latest: Any = None
        if self._planned is not None and self._planned[0] is plan:
            _, latest, view = self._planned
        else:
            view = self.view()
        if self._state() != plan.state:
            raise StalePlanError(f"{self.topic} changed since the compaction plan was made; plan again")
        last = plan.horizon
        if last is not None and latest is None:  # a plan read back from JSON: phase one again, same topic
            latest = self._phase_one(view, last)
            if (len(latest), latest.tombstones, latest.messages) != (plan.keys, plan.tombstones, plan.messages_read):
                raise StalePlanError(f"{self.topic}: phase one no longer finds what the plan says; plan again")
        self._planned = None
        # the subscription exists from the first run on, even one with nothing new (as before plans)
        cursor = self.ml.open_cursor(COMPACTION_CURSOR, "earliest")
        if last is None:
            return CompactionResult(None, view.horizon, plan.previous_ledger_id, 0, 0, 0, 0)
        previous = plan.previous_ledger_id
        handle = LedgerHandle.create(self.factory, compacted_ledger_metadata(self.topic, last), "CRC32", b"")
        written = 0
        try:
            for entries, lids, eids in _chunks(self._source(view, last)):
                out = latest.compact_entries(
                    entries,
                    lids,
                    eids,
                    partition=self.options.partition,
                    retain_null_key=self.options.retain_null_key,
                    retained_only=self.options.retained_only,
                )
                for raw in out.column("raw_message").to_pylist():
                    handle.add_entry(raw)
                    written += 1
            handle.close()
            props = dict(cursor.properties)
            props[COMPACTED_LEDGER_PROPERTY] = handle.ledger_id
            cursor.mark_delete(last, properties=props)
        except BaseException:
            self.factory.delete_ledger(handle.ledger_id)  # the old compacted state stays as it was
            raise
        if previous is not None and previous != handle.ledger_id:
            self.factory.delete_ledger(previous)
        return CompactionResult(
            handle.ledger_id, last, previous, len(latest), latest.tombstones, latest.messages, written
        )

    def compact(self) -> CompactionResult:
        """Plans and executes one compaction."""
        return self.execute(self.plan())


class CompactedTopic:
    """The compacted view of a topic (``CompactedTopicImpl``): ``ml`` gives the topic's entries
    (``read_after``, ``read_entry``, ``last_confirmed_entry``), ``ledger`` the compacted ledger's
    (``entries(first)``), and ``horizon`` is the ``__compaction`` mark-delete. :meth:`open` builds it
    for a store; :mod:`pulsarkit.analysis.compaction` for a data directory."""

    COMPACT_LEDGER_EMPTY = -1
    NEWER_THAN_COMPACTED = -2

    def __init__(self, ml: Any, horizon: Position | None, compacted_ledger_id: int | None, ledger: Any) -> None:
        self.ml = ml
        #: Everything up to the horizon is served from the compacted ledger.
        self.horizon = horizon
        self.compacted_ledger_id = compacted_ledger_id
        self._ledger = ledger
        self._ids: list[Position] = []
        if ledger is not None:
            self._ids = [Position(*_native.decode_raw_message(d)[:2]) for _, d in ledger.entries()]

    @classmethod
    def open(cls, factory: Any, ml: Any) -> CompactedTopic:
        """The view of a managed ledger on a store, from its ``__compaction`` cursor."""
        try:
            cursor = ml.cursor(COMPACTION_CURSOR)
        except CursorNotFoundError:
            return cls(ml, None, None, None)
        lid = cursor.properties.get(COMPACTED_LEDGER_PROPERTY)
        if lid is None:
            return cls(ml, None, None, None)
        return cls(ml, cursor.mark_delete_position, int(lid), LedgerHandle.open(factory, int(lid)))

    # ---------------------------------------------------------------- the compacted ledger

    def compacted_entries(self, first: int = 0) -> Iterator[tuple[Position, bytes]]:
        """``(original position, entry)`` of the compacted ledger's entries from index ``first``."""
        if self._ledger is None:
            return
        for _, raw in self._ledger.entries(first):
            lid, eid, _, _, entry = _native.decode_raw_message(raw)
            yield Position(lid, eid), entry

    def find_start_point(self, p: Position) -> int:
        """Index of the first compacted entry at or after ``p``; ``COMPACT_LEDGER_EMPTY`` or
        ``NEWER_THAN_COMPACTED`` as ``CompactedTopicImpl.findStartPoint`` answers."""
        if not self._ids:
            return self.COMPACT_LEDGER_EMPTY
        i = bisect.bisect_left(self._ids, p)
        return self.NEWER_THAN_COMPACTED if i == len(self._ids) else i

    def read_entries(self, start: Position | None = None) -> Iterator[tuple[Position, bytes]]:
        """What a ``readCompacted`` cursor at ``start`` (default: the beginning) reads: compacted
        entries below the horizon, then the topic after it (``asyncReadEntriesOrWait``)."""
        start = start or Position(-1, -1)
        if self.horizon is None or start > self.horizon:
            yield from self.ml.read_after(Position(start.ledger_id, start.entry_id - 1))
            return
        i = self.find_start_point(start)
        if i >= 0:
            yield from self.compacted_entries(i)
        yield from self.ml.read_after(self.horizon)

    def _first_match(self, pred: Any) -> Position | None:
        """Binary search over the compacted entries for the first one ``pred`` accepts (monotone)."""
        lo, hi = 0, len(self._ids)
        while lo < hi:
            mid = (lo + hi) // 2
            _, entry = next(self.compacted_entries(mid))
            if pred(Entry.parse(entry, verify_checksum=False)):
                hi = mid
            else:
                lo = mid + 1
        return self._ids[lo] if lo < len(self._ids) else None

    def find_entry_by_publish_time(self, publish_time: int) -> Position | None:
        """The first compacted entry published at or after ``publish_time``."""
        return self._first_match(lambda e: e.metadata.publish_time >= publish_time)

    def find_entry_by_index(self, index: int) -> Position | None:
        """The first compacted entry whose broker entry metadata index reaches ``index`` (PIP-70)."""
        return self._first_match(
            lambda e: (
                e.broker_entry_metadata is not None
                and e.broker_entry_metadata.index is not None
                and e.broker_entry_metadata.index >= index
            )
        )

    def last_message_position(self) -> MessagePosition:
        """``getLastMessagePosition``: the last message of the compacted ledger, EARLIEST when empty."""
        if not self._ids:
            return EARLIEST
        pos, entry = next(self.compacted_entries(len(self._ids) - 1))
        batch_index, publish_time = _native.last_message_position(entry)
        return MessagePosition(pos.ledger_id, pos.entry_id, batch_index, publish_time)

    # ---------------------------------------------------------------- GetLastMessageId

    def last_message_id(self) -> MessagePosition:
        """The last message id a ``readCompacted`` reader gets: the topic's last entry when it lies past
        the horizon (its last batch index), else the compacted ledger's last message; EARLIEST for an
        empty view (a tombstone at the tail or an empty compacted ledger leaves nothing to read)."""
        last = self.ml.last_confirmed_entry
        if last.entry_id >= 0 and (self.horizon is None or last > self.horizon):
            e = Entry.parse(self.ml.read_entry(last), verify_checksum=False)
            md = e.metadata
            # ServerCnx.getLargestBatchIndexWhenPossible: a batch of one answers index 0; only an entry
            # without the field is -1 (the compacted ledger's own rule, batches of one at -1, is not this one)
            n = md.num_messages_in_batch if md.HasField("num_messages_in_batch") else 0
            return MessagePosition(last.ledger_id, last.entry_id, n - 1 if n > 0 else -1, md.publish_time)
        return self.last_message_position()

    def has_message_available(self, read_position: Position, batch_index: int = -1) -> bool:
        """``Reader.hasMessageAvailable`` for a ``readCompacted`` reader whose last delivered message is
        ``(read_position, batch_index)`` (``Position(-1, -1)`` before the first read)."""
        last = self.last_message_id()
        if last == EARLIEST:
            return False
        return (last.ledger_id, last.entry_id, last.batch_index) > (
            read_position.ledger_id,
            read_position.entry_id,
            batch_index,
        )


__all__ = [
    "EARLIEST",
    "READ_BATCH",
    "CompactedTopic",
    "CompactionItem",
    "CompactionOptions",
    "CompactionPlan",
    "CompactionResult",
    "Compactor",
    "MessagePosition",
    "compacted_ledger_metadata",
]
