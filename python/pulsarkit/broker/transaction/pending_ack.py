"""A subscription's pending-ack store (``MLPendingAckStore``): managed ledger
``<topic's managed ledger>-<subscription>__transaction_pending_ack``, cursor ``__pending_ack_state``.

Acknowledgements made in a transaction are logged here (ACK records with their positions and batch
ack sets) until the transaction commits or aborts (COMMIT / ABORT records). The store does not use
batch-index deletes: it trims whole log entries, mark-deleting its cursor up to the log position of
the largest acknowledged position the subscription's own mark-delete has passed
(``clearUselessLogData`` over the ``pendingAckLogIndex``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...codec.txn import AckedPosition, PendingAckRecord, decode_pending_ack_entry, pending_ack_record
from ...managed_ledger.position import Position
from ..topic_name import PENDING_ACK_SUFFIX
from .buffered_writer import TxnBatchedPosition, TxnLogBufferedWriterConfig
from .log import BufferedLogOptions, _replay, open_buffered_log
from .metrics import PENDING_ACK_STORE_PREFIX

if TYPE_CHECKING:  # the factory (and the bookie GC it runs) is the caller's: not imported by a read of acks
    from ...managed_ledger.factory import ManagedLedgerFactory

PENDING_ACK_CURSOR = "__pending_ack_state"


def pending_ack_store_name(topic_managed_ledger: str, subscription: str) -> str:
    return f"{topic_managed_ledger}-{subscription}{PENDING_ACK_SUFFIX}"


#: One acknowledgement a pending-ack record holds: the position (with its ack set) and the ack type.
HeldAck = tuple[AckedPosition, str]


@dataclass
class PendingAcks:
    """A pending-ack store's records replayed in order (as ``MLPendingAckStore`` recovers): the
    acknowledgements each transaction still open holds, and those a COMMIT made final (an ABORT drops
    its transaction's)."""

    open: dict[tuple[int, int], list[HeldAck]] = field(default_factory=dict)
    committed: list[HeldAck] = field(default_factory=list)

    def apply(self, r: PendingAckRecord) -> None:
        key = (r.txnid_most_bits or 0, r.txnid_least_bits or 0)
        if r.op == "ACK":
            self.open.setdefault(key, []).extend((p, r.ack_type or "Individual") for p in r.positions)
        elif r.op == "COMMIT":
            self.committed.extend(self.open.pop(key, []))
        elif r.op == "ABORT":
            self.open.pop(key, None)


class PendingAckStore:
    """One subscription's pending-ack log (see the module docstring)."""

    def __init__(
        self,
        factory: ManagedLedgerFactory,
        topic_managed_ledger: str,
        subscription: str,
        config: TxnLogBufferedWriterConfig | None = None,
        options: BufferedLogOptions | None = None,
    ) -> None:
        self.config = config or TxnLogBufferedWriterConfig()
        self.subscription = subscription
        self.managed_ledger, self.cursor, self.writer = open_buffered_log(
            factory,
            pending_ack_store_name(topic_managed_ledger, subscription),
            PENDING_ACK_CURSOR,
            self.config,
            PENDING_ACK_STORE_PREFIX,
            options or BufferedLogOptions(),
        )
        #: largest acknowledged position of an ACK record -> the log position of that record
        self._index: dict[Position, Position] = {}
        self._lock = threading.Lock()

    def _append(self, record: bytes, acked: Sequence[Position]) -> Future[Position]:
        f = self.writer.async_add_data(record)
        if acked:
            top = max(acked)

            def index(done: Future[Position]) -> None:
                if done.exception() is None:
                    with self._lock:
                        self._index[top] = done.result()

            f.add_done_callback(index)
        return f

    def append_individual_ack(
        self, txn_id: tuple[int, int], positions: Iterable[tuple[Position, Sequence[int] | None, int | None]]
    ) -> Future[Position]:
        """Logs positions acknowledged in ``txn_id``: ``(position, batch ack set or None, batch size or None)``."""
        ps = list(positions)
        rec = pending_ack_record("ACK", txn_id, [(p[0], p[1], a, b) for p, a, b in ps], "Individual")
        return self._append(rec, [Position(*p) for p, _, _ in ps])

    def append_cumulative_ack(self, txn_id: tuple[int, int], position: Position) -> Future[Position]:
        rec = pending_ack_record("ACK", txn_id, [(position[0], position[1], None, None)], "Cumulative")
        return self._append(rec, [Position(*position)])

    def append_commit_mark(self, txn_id: tuple[int, int], ack_type: str = "Individual") -> Future[Position]:
        return self._append(pending_ack_record("COMMIT", txn_id, (), ack_type), [])

    def append_abort_mark(self, txn_id: tuple[int, int], ack_type: str = "Individual") -> Future[Position]:
        return self._append(pending_ack_record("ABORT", txn_id, (), ack_type), [])

    def replay(self) -> Iterator[tuple[Position, PendingAckRecord]]:
        """The records after the store's mark-delete, in order, rebuilding the log index as it goes."""
        for pos, r in _replay(self.managed_ledger, self.cursor, decode_pending_ack_entry):
            if r.op == "ACK" and r.positions:
                top = max(Position(p.ledger_id, p.entry_id) for p in r.positions)
                with self._lock:
                    self._index[top] = pos
            yield pos, r

    def clear_useless_log_data(self, subscription_mark_delete: Position) -> Position | None:
        """Mark-deletes the log up to the records whose acknowledged positions the subscription's
        mark-delete has passed; returns the new store mark-delete, or None when nothing moved."""
        with self._lock:
            done = sorted(k for k in self._index if k <= subscription_mark_delete)
            if not done:
                return None
            log_pos = max(self._index.pop(k) for k in done)
        target = Position(*log_pos)
        if isinstance(log_pos, TxnBatchedPosition) and log_pos.batch_index < log_pos.batch_size - 1:
            # Other records of this entry may still be needed: keep the entry.
            target = self.managed_ledger.previous_position(target)
        if target > self.cursor.mark_delete_position:
            self.cursor.mark_delete(target)
            return target
        return None

    def close(self) -> None:
        self.writer.close().result()


__all__ = ["PENDING_ACK_CURSOR", "HeldAck", "PendingAckStore", "PendingAcks", "pending_ack_store_name"]
