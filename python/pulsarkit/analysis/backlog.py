"""A subscription's backlog: exactly the messages a consumer re-attaching to it would receive.

The cursor as the broker recovers it (``ManagedCursorInfo``, or the last ``PositionInfo`` of its cursor
ledger): entries after the mark-delete position, minus individually deleted ranges; of a partly
acknowledged batch only the indexes its recovered ack set still marks (a set bit = not acknowledged; the
broker sends ``ack_set`` and the client filters). Then the subscription's pending-ack store is replayed
as ``MLPendingAckStore`` does: acknowledgements of committed transactions apply, those of transactions
still open hold their messages back, aborted ones are dropped. Markers, aborted and unfinished
transactions are not delivered (read-committed), chunks are reassembled from the chunks still
unacknowledged.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..broker.topic_name import PENDING_ACK_SUFFIX
from ..broker.transaction.pending_ack import PendingAcks
from ..codec.txn import decode_pending_ack_entry
from ..managed_ledger.ack_set import bitset_from_words
from ..managed_ledger.position import Position
from ..scan.datadir import DataDir
from ..scan.records import Cursor
from ..scan.schema import arrow_schema, json_record, message_fields
from .messages import message_batches


@dataclass
class _Acks:
    """What the broker's view adds to the cursor: whole entries and batch indexes acknowledged."""

    cumulative: Position | None = None
    entries: set[Position] = field(default_factory=set)
    #: position -> bits still unacknowledged (AND of every ack set applied)
    batches: dict[Position, int] = field(default_factory=dict)

    def apply(self, pos: Position, ack_set: Sequence[int], cumulative: bool) -> None:
        if cumulative and not ack_set:
            self.cumulative = max(self.cumulative or pos, pos)
        elif ack_set:
            self.batches[pos] = self.batches.get(pos, -1) & bitset_from_words(ack_set)  # -1: every bit set
        else:
            self.entries.add(pos)


def pending_acks(dd: DataDir, c: Cursor) -> _Acks:
    """The subscription's pending-ack store replayed from its ``__pending_ack_state`` mark-delete on."""
    out = _Acks()
    ml = f"{c.managed_ledger}-{c.name}{PENDING_ACK_SUFFIX}"
    if ml not in dd.ml_infos:
        return out
    state = next((x for x in dd.cursors(ml) if x.name == "__pending_ack_state"), None)
    replayed = PendingAcks()
    for _, records in dd.ml_records(
        ml, decode_pending_ack_entry, "bad_pending_ack_entry", state.mark_delete if state else None
    ):
        for r in records:
            replayed.apply(r)
    # committed acknowledgements apply; those of a transaction still open hold their messages back
    for p, ack_type in [*replayed.committed, *(a for held in replayed.open.values() for a in held)]:
        out.apply(Position(p.ledger_id, p.entry_id), p.ack_set or [], ack_type == "Cumulative")
    return out


@dataclass
class SubscriptionAcks:
    """The backlog's filter on the message read (:class:`pulsarkit.scan.messages.AckFilter`): the
    cursor as recovered (mark-delete, individually deleted ranges, batch ack sets) and the
    subscription's pending acks."""

    cursor: Cursor
    pending: _Acks

    def skip(self, ledger_id: int, entry_id: int) -> bool:
        pos = Position(ledger_id, entry_id)
        c, extra = self.cursor, self.pending
        return c.is_deleted(pos) or pos in extra.entries or (extra.cumulative is not None and pos <= extra.cumulative)

    def batch_indexes(self, ledger_id: int, entry_id: int, batch_size: int) -> set[int] | None:
        pos = Position(ledger_id, entry_id)
        c, extra = self.cursor, self.pending
        if pos not in c.batch_ack_sets and pos not in extra.batches:
            return None
        left = set(c.unacked_batch_indexes(pos, batch_size))
        if pos in extra.batches:
            left = {i for i in left if extra.batches[pos] >> i & 1}
        return left


def backlog_batches(dd: DataDir, topic: str, subscription: str, *, txn: str = "committed") -> Iterator[pa.RecordBatch]:
    """The subscription's backlog as Arrow record batches of the one message schema: the topic's
    message read (:func:`pulsarkit.analysis.messages.message_batches`) after the mark-delete
    position, with the cursor's and pending acks' filter."""
    c: Cursor = dd.cursor(topic, subscription)
    acks = SubscriptionAcks(c, pending_acks(dd, c))
    yield from message_batches(dd, [c.managed_ledger], txn=txn, after={c.managed_ledger: c.mark_delete}, acks=acks)


def backlog_rows(dd: DataDir, topic: str, subscription: str, *, txn: str = "committed") -> Iterator[dict[str, Any]]:
    """:func:`backlog_batches` row by row (dicts of the one message schema)."""
    for b in backlog_batches(dd, topic, subscription, txn=txn):
        yield from b.to_pylist()


def iter_backlog(dd: DataDir, topic: str, subscription: str, *, txn: str = "committed") -> Iterator[dict[str, Any]]:
    """:func:`backlog_rows` rendered as JSON records (as ``pulsarkit backlog`` prints them)."""
    return map(json_record, backlog_rows(dd, topic, subscription, txn=txn))


def backlog_table(dd: DataDir, topic: str, subscription: str, *, txn: str = "committed") -> pa.Table:
    """:func:`backlog_batches` as one Arrow table."""
    return pa.Table.from_batches(
        list(backlog_batches(dd, topic, subscription, txn=txn)), schema=arrow_schema(message_fields())
    )
