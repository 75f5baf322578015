"""The transaction coordinator's log (``MLTransactionLogImpl``): managed ledger
``pulsar/system/persistent/__transaction_log_<tc id>``, cursor ``transaction.subscription``.

Records go through a :class:`TxnLogBufferedWriter`. A finished transaction's records are deleted
record by record: a batch-index delete on the cursor (``setAckSetByIndex``), the entry removed once
every record in it is deleted. Replay reads what the cursor has not deleted, batched and unbatched
entries mixed, skipping the cleared indexes of partly deleted batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypeVar

from ...codec.txn import RecordPlace, TxnLogRecord, TxnSubscription, decode_txn_log_entry
from ...managed_ledger.ack_set import bitset_from_words
from ...managed_ledger.config import ManagedLedgerConfig
from ...managed_ledger.position import Position
from ..topic_name import TXN_LOG_PREFIX
from .buffered_writer import Executor, Timer, TxnBatchedPosition, TxnLogBufferedWriter, TxnLogBufferedWriterConfig
from .metrics import COORDINATOR_PREFIX, TxnLogBufferedWriterMetricsStats

if TYPE_CHECKING:  # prometheus_client is imported when a writer records metrics, not by every read
    from prometheus_client import CollectorRegistry

    # the managed ledger (and the bookie GC its factory runs) is the caller's, not imported by a read of a log
    from ...managed_ledger.cursor import ManagedCursor
    from ...managed_ledger.factory import ManagedLedgerFactory
    from ...managed_ledger.ledger import ManagedLedger

TRANSACTION_LOG_CURSOR = "transaction.subscription"
R = TypeVar("R", bound=RecordPlace)


def transaction_log_name(tc_id: int) -> str:
    """The managed-ledger name of coordinator ``tc_id``'s log."""
    return f"{TXN_LOG_PREFIX}{tc_id}"


def replay_records(ledger: ManagedLedger, cursor: ManagedCursor) -> Iterator[tuple[Position, TxnLogRecord]]:
    """``(position, record)`` of every record ``cursor`` has not deleted, in log order. Records of a
    batch carry a :class:`TxnBatchedPosition`; ``decode`` turns an entry into its records."""
    return _replay(ledger, cursor, decode_txn_log_entry)


def _replay(
    ledger: ManagedLedger, cursor: ManagedCursor, decode: Callable[[bytes], Sequence[R]]
) -> Iterator[tuple[Position, R]]:
    for p, data in ledger.read_after(cursor.mark_delete_position):
        if cursor.is_deleted(p):
            continue
        records = decode(data)
        words = cursor.deleted_batch_indexes(p) if len(records) > 1 else None
        live = bitset_from_words(words) if words is not None else -1  # -1: every record live
        for r in records:
            if not r.batched:
                yield Position(*p), r
            elif live >> r.batch_index & 1:
                yield TxnBatchedPosition(p[0], p[1], r.batch_size, r.batch_index), r


#: The statuses after which a coordinator forgets a transaction (and deletes its records).
ENDED = ("COMMITTED", "ABORTED")

#: The statuses each status may move to (``TransactionUtil.canTransitionTo``): itself, and on.
TRANSITIONS = {
    "OPEN": ("OPEN", "COMMITTING", "ABORTING"),
    "COMMITTING": ("COMMITTING", "COMMITTED"),
    "ABORTING": ("ABORTING", "ABORTED"),
    "COMMITTED": ("COMMITTED",),
    "ABORTED": ("ABORTED",),
}


@dataclass
class TxnLogState:
    """What a coordinator's log says of one transaction, its records replayed in order as
    ``MLTransactionMetadataStore`` recovers ``TxnMetaImpl``: ``status`` is None until its NEW.

    A record the coordinator rejects changes nothing (Pulsar appends a record before it checks it, so
    a rejected one stays in the log, and replay skips it): an UPDATE whose expected status is not the
    current one or whose move is not allowed, an ADD_PARTITION or ADD_SUBSCRIPTION once the
    transaction is no longer OPEN, any record before the NEW (the coordinator no longer knows it)."""

    status: str | None = None
    timeout_ms: int | None = None
    start_time: int | None = None
    last_modification_time: int | None = None
    owner: str | None = None
    partitions: list[str] = field(default_factory=list)
    subscriptions: list[TxnSubscription] = field(default_factory=list)
    #: an UPDATE said the coordinator ended it because its timeout passed
    is_timeout: bool = False

    def apply(self, r: TxnLogRecord) -> bool:
        """Applies ``r``; False when the coordinator rejects it (then nothing changed)."""
        if r.op == "NEW":
            if self.status is None:  # a second NEW adds nothing (handleMetadataEntry keeps the first)
                self.status = "OPEN"
                self.timeout_ms, self.start_time, self.owner = r.timeout_ms, r.start_time, r.owner
        elif self.status is None:
            return False
        elif r.op in ("ADD_PARTITION", "ADD_SUBSCRIPTION"):
            if self.status != "OPEN":  # addProducedPartitions / addAckedPartitions: checkTxnStatus(OPEN)
                return False
            if r.op == "ADD_PARTITION":
                self.partitions.extend(p for p in r.partitions if p not in self.partitions)
            else:
                self.subscriptions.extend(s for s in r.subscriptions if s not in self.subscriptions)
        elif r.op == "UPDATE":  # TxnMetaImpl.updateTxnStatus
            if r.expected_status != self.status or r.new_status not in TRANSITIONS[self.status]:
                return False
            self.status = r.new_status
            self.is_timeout = self.is_timeout or bool(r.is_timeout)
        else:
            return False
        if r.last_modification_time is not None:
            self.last_modification_time = r.last_modification_time
        return True


@dataclass(frozen=True)
class BufferedLogOptions:
    """How a coordinator log or a pending-ack store is opened, beyond its name and writer config: its
    managed ledger's config, where its writer metrics go (``broker`` is their label), and the writer's
    executor and timer (defaults: the writer's own)."""

    managed_ledger_config: ManagedLedgerConfig | None = None
    metrics_registry: CollectorRegistry | None = None
    broker: str = "standalone"
    executor: Executor | None = None
    timer: Timer | None = None


def open_buffered_log(
    factory: ManagedLedgerFactory,
    name: str,
    cursor_name: str,
    config: TxnLogBufferedWriterConfig,
    metrics_prefix: str,
    options: BufferedLogOptions,
) -> tuple[ManagedLedger, ManagedCursor, TxnLogBufferedWriter]:
    """(managed ledger, its cursor, a writer on it): what the coordinator log and a pending-ack store
    both open. Metrics are kept only with batching on, as Pulsar records nothing otherwise."""
    ml = factory.managed_ledger(name, options.managed_ledger_config)
    cursor = ml.open_cursor(cursor_name, "earliest")
    metrics = TxnLogBufferedWriterMetricsStats(metrics_prefix, options.broker, options.metrics_registry)
    writer = TxnLogBufferedWriter(
        ml,
        config,
        metrics=metrics if config.batch_enabled else None,
        executor=options.executor,
        timer=options.timer,
    )
    return ml, cursor, writer


class TransactionLog:
    """One coordinator's log over a managed-ledger factory (see the module docstring)."""

    def __init__(
        self,
        factory: ManagedLedgerFactory,
        tc_id: int,
        config: TxnLogBufferedWriterConfig | None = None,
        options: BufferedLogOptions | None = None,
    ) -> None:
        self.tc_id = tc_id
        self.config = config or TxnLogBufferedWriterConfig()
        options = options or BufferedLogOptions()
        mlc = options.managed_ledger_config or ManagedLedgerConfig()
        if self.config.batch_enabled:  # records are deleted by batch index
            mlc = replace(mlc, deletion_at_batch_index_level_enabled=True)
        options = replace(options, managed_ledger_config=mlc)
        self.managed_ledger, self.cursor, self.writer = open_buffered_log(
            factory, transaction_log_name(tc_id), TRANSACTION_LOG_CURSOR, self.config, COORDINATOR_PREFIX, options
        )

    def append(self, record: bytes) -> Future[Position]:
        """Writes one ``TransactionMetadataEntry``; the future gives its position."""
        return self.writer.async_add_data(record)

    def delete_positions(self, positions: Iterable[Position]) -> None:
        """Deletes records: a batched record by clearing its bit, a plain one as a whole entry."""
        for p in positions:
            ack_set = p.ack_set() if isinstance(p, TxnBatchedPosition) else None
            if ack_set is None:
                self.cursor.delete(Position(*p))
            else:
                self.cursor.delete(Position(*p), ack_set=ack_set)

    def replay(self) -> Iterator[tuple[Position, TxnLogRecord]]:
        """The records not yet deleted, in order (``MLTransactionLogImpl.replayAsync``)."""
        return replay_records(self.managed_ledger, self.cursor)

    def close(self) -> None:
        self.writer.close().result()


__all__ = [
    "ENDED",
    "TRANSACTION_LOG_CURSOR",
    "TRANSITIONS",
    "BufferedLogOptions",
    "TransactionLog",
    "TxnLogState",
    "replay_records",
    "transaction_log_name",
]
