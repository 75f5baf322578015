"""The transaction inspector: what a data directory says about transactions, with no broker.

Three views, each a function returning an Arrow table (and a dict API underneath):

* :func:`transactions_table`: every transaction the coordinators' logs, the pending-ack stores and
  the topics' commit/abort markers know, with its state, age, timeout, partitions and subscriptions,
  and whether it is still open past its timeout (a hung transaction);
* :func:`pending_ack_table`: per subscription, its pending-ack store's records and how far they grew
  past the store's mark-delete, and the transactions still holding acknowledgements;
* :func:`transaction_log_table`: per coordinator, the size of its log topic and what trimming would
  free once the ``transaction.subscription`` cursor's deletes are applied.

A coordinator deletes the records of a finished transaction from its log (batch-index deletes on the
``transaction.subscription`` cursor, PIP-160); the records stay on disk until their ledger is trimmed,
so a finished transaction is still found here, with ``live_log_records`` 0.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from ..broker.topic_name import PENDING_ACK_SUFFIX, TXN_LOG_PREFIX, ml_kind, ml_to_topic
from ..broker.transaction import PENDING_ACK_CURSOR, TRANSACTION_LOG_CURSOR
from ..broker.transaction.log import TxnLogState
from ..broker.transaction.pending_ack import PendingAcks
from ..codec.txn import TxnSubscription, decode_pending_ack_entry, decode_txn_log_entry
from ..managed_ledger.ack_set import bitset_from_words
from ..managed_ledger.position import Position
from ..scan.datadir import DataDir
from ..scan.facts import topic_markers
from ..scan.records import Cursor

_UNFINISHED = ("OPEN", "COMMITTING", "ABORTING")


@dataclass
class Transaction:
    most_bits: int
    least_bits: int
    #: What its coordinator's log says (status, timeout, partitions, subscriptions...), its records
    #: replayed as the coordinator replays them.
    log: TxnLogState = field(default_factory=TxnLogState)
    #: topic -> the TXN_COMMIT / TXN_ABORT marker the transaction left in that topic.
    markers: dict[str, str] = field(default_factory=dict)
    #: Topics holding messages of the transaction.
    topics: list[str] = field(default_factory=list)
    #: pending-ack store topic -> its last op for the transaction (ACK, COMMIT, ABORT).
    pending_acks: dict[str, str] = field(default_factory=dict)
    #: Coordinator-log records of the transaction, and how many the log cursor has not deleted.
    log_records: int = 0
    live_log_records: int = 0

    @property
    def coordinator_state(self) -> str | None:
        """The coordinator's last recorded status (OPEN, COMMITTING, COMMITTED, ABORTING, ABORTED)."""
        return self.log.status

    # what the log says, by the names the inspector's rows use
    @property
    def start_time(self) -> int | None:
        return self.log.start_time

    @property
    def timeout_ms(self) -> int | None:
        return self.log.timeout_ms

    @property
    def partitions(self) -> list[str]:
        return self.log.partitions

    @property
    def subscriptions(self) -> list[TxnSubscription]:
        return self.log.subscriptions

    @property
    def owner(self) -> str | None:
        return self.log.owner

    @property
    def last_modification_time(self) -> int | None:
        return self.log.last_modification_time

    @property
    def is_timeout(self) -> bool:
        """Set when the coordinator ended it because its timeout passed."""
        return self.log.is_timeout

    @property
    def id(self) -> str:
        return f"({self.most_bits},{self.least_bits})"

    @property
    def coordinator_id(self) -> int:
        """``TxnID.mostSigBits`` is the id of the coordinator that owns the transaction."""
        return self.most_bits

    @property
    def state(self) -> str:
        """The outcome: a finished coordinator status, else the markers the transaction left in its
        topics (the coordinator trims a finished transaction's records with its log), else the
        coordinator's open status; UNKNOWN when neither says anything."""
        if self.coordinator_state in ("COMMITTED", "ABORTED"):
            return self.coordinator_state
        seen = set(self.markers.values()) | set(self.pending_acks.values())
        if "TXN_ABORT" in seen or "ABORT" in seen:
            return "ABORTED"
        if "TXN_COMMIT" in seen or "COMMIT" in seen:
            return "COMMITTED"
        return self.coordinator_state or ("OPEN" if "ACK" in seen else "UNKNOWN")

    def age_ms(self, now_ms: int) -> int | None:
        return None if self.start_time is None else now_ms - self.start_time

    def timed_out(self, now_ms: int) -> bool:
        """Unfinished and past its timeout: the coordinator should have aborted it."""
        if self.state not in _UNFINISHED or self.start_time is None or self.timeout_ms is None:
            return False
        return self.start_time + self.timeout_ms < now_ms


def _log_cursor(dd: DataDir, ml: str, name: str) -> Cursor | None:
    return next((c for c in dd.cursors(ml) if c.name == name), None)


def _record_deleted(cursor: Cursor | None, pos: Position, batched: bool, batch_index: int) -> bool:
    if cursor is None:
        return False
    if cursor.is_deleted(pos):
        return True
    words = cursor.stored_batch_ack_sets.get(pos)
    if not batched or words is None:
        return False
    return not (bitset_from_words(words) >> batch_index) & 1


def transactions(dd: DataDir) -> dict[tuple[int, int], Transaction]:
    """Every transaction the coordinators' logs, the pending-ack stores and the topics know, keyed by
    ``(most_bits, least_bits)``."""
    out: dict[tuple[int, int], Transaction] = {}
    for ml in dd.managed_ledger_names():
        if ml_kind(ml) != "transaction_log":
            continue
        cursor = _log_cursor(dd, ml, TRANSACTION_LOG_CURSOR)
        for pos, recs in dd.ml_records(ml, decode_txn_log_entry, "bad_txn_log_entry"):
            for r in recs:
                key = (r.txnid_most_bits, r.txnid_least_bits)
                t = out.setdefault(key, Transaction(*key))
                t.log_records += 1
                t.live_log_records += not _record_deleted(cursor, pos, r.batched, r.batch_index)
                t.log.apply(r)
    for ml in dd.managed_ledger_names():
        if ml_kind(ml) != "pending_ack":
            continue
        for _, recs in dd.ml_records(ml, decode_pending_ack_entry, "bad_pending_ack_entry"):
            for r in recs:
                key = (r.txnid_most_bits or 0, r.txnid_least_bits or 0)
                out.setdefault(key, Transaction(*key)).pending_acks[ml_to_topic(ml)] = r.op
    topics = [ml for ml in dd.managed_ledger_names() if ml_kind(ml) == "topic"]
    for ml, (marks, used) in topic_markers(dd, topics).items():
        name = ml_to_topic(ml)
        for key in used:
            t = out.setdefault(key, Transaction(*key))
            if name not in t.topics:
                t.topics.append(name)
        for key, m in marks.items():
            out.setdefault(key, Transaction(*key)).markers[name] = m
    return out


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms


def transaction_rows(dd: DataDir, now_ms: int | None = None) -> Iterator[dict[str, Any]]:
    """One dict per transaction, in id order (the rows of :func:`transactions_table`)."""
    now = _now(now_ms)
    for _, t in sorted(transactions(dd).items()):
        yield {
            "txn": t.id,
            "most_bits": t.most_bits,
            "least_bits": t.least_bits,
            "coordinator_id": t.coordinator_id,
            "state": t.state,
            "coordinator_state": t.coordinator_state,
            "start_time": t.start_time,
            "age_ms": t.age_ms(now),
            "timeout_ms": t.timeout_ms,
            "timed_out": t.timed_out(now),
            "is_timeout": t.is_timeout,
            "partitions": t.partitions,
            "subscriptions": [{"topic": x.topic, "subscription": x.subscription} for x in t.subscriptions],
            "topics": t.topics,
            "markers": sorted(t.markers.items()),
            "pending_acks": sorted(t.pending_acks.items()),
            "log_records": t.log_records,
            "live_log_records": t.live_log_records,
        }


TRANSACTIONS_SCHEMA = pa.schema(
    [
        ("txn", pa.string()),
        ("most_bits", pa.uint64()),
        ("least_bits", pa.uint64()),
        ("coordinator_id", pa.uint64()),
        ("state", pa.string()),
        ("coordinator_state", pa.string()),
        ("start_time", pa.uint64()),
        ("age_ms", pa.int64()),
        ("timeout_ms", pa.uint64()),
        ("timed_out", pa.bool_()),
        ("is_timeout", pa.bool_()),
        ("partitions", pa.list_(pa.string())),
        ("subscriptions", pa.list_(pa.struct([("topic", pa.string()), ("subscription", pa.string())]))),
        ("topics", pa.list_(pa.string())),
        ("markers", pa.map_(pa.string(), pa.string())),
        ("pending_acks", pa.map_(pa.string(), pa.string())),
        ("log_records", pa.int64()),
        ("live_log_records", pa.int64()),
    ]
)


def transactions_table(dd: DataDir, now_ms: int | None = None) -> Any:
    """Every transaction as one Arrow row (see the module docstring); ``now_ms`` fixes the clock
    that ages and timeouts are measured against."""
    return pa.Table.from_pylist(list(transaction_rows(dd, now_ms)), schema=TRANSACTIONS_SCHEMA)


def _ml_bytes(dd: DataDir, ml: str) -> tuple[int, int, int]:
    """(ledgers, entries, bytes on the bookies) of a managed ledger."""
    ledgers = [dd.ledgers[lid] for lid in dd.ml_ledgers(ml) if lid in dd.ledgers]
    return len(ledgers), sum(x.entries for x in ledgers), sum(x.bytes_on_bookie for x in ledgers)


def _reclaimable(dd: DataDir, ml: str, cursor: Cursor | None) -> int:
    """Bytes of the ledgers entirely at or below the cursor's mark-delete, except the current one:
    what trimming frees once retention allows (``ManagedLedgerImpl.internalTrimLedgers``)."""
    if cursor is None:
        return 0
    ids = dd.ml_ledgers(ml)
    freed = 0
    for lid in ids[:-1]:
        led = dd.ledgers.get(lid)
        if led is not None and Position(lid, led.last_entry_id) <= cursor.mark_delete:
            freed += led.bytes_on_bookie
    return freed


def transaction_log_rows(dd: DataDir) -> Iterator[dict[str, Any]]:
    for ml in dd.managed_ledger_names():
        if ml_kind(ml) != "transaction_log":
            continue
        cursor = _log_cursor(dd, ml, TRANSACTION_LOG_CURSOR)
        ledgers, entries, size = _ml_bytes(dd, ml)
        records = live = batched_entries = 0
        for pos, recs in dd.ml_records(ml, decode_txn_log_entry, "bad_txn_log_entry"):
            batched_entries += bool(recs and recs[0].batched)
            for r in recs:
                records += 1
                live += not _record_deleted(cursor, pos, r.batched, r.batch_index)
        yield {
            "topic": ml_to_topic(ml),
            "coordinator_id": int(ml[len(TXN_LOG_PREFIX) :]) if ml[len(TXN_LOG_PREFIX) :].isdigit() else None,
            "ledgers": ledgers,
            "entries": entries,
            "batched_entries": batched_entries,
            "records": records,
            "live_records": live,
            "bytes": size,
            "mark_delete": str(cursor.mark_delete) if cursor else None,
            "reclaimable_bytes": _reclaimable(dd, ml, cursor),
        }


TRANSACTION_LOG_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("coordinator_id", pa.int64()),
        ("ledgers", pa.int64()),
        ("entries", pa.int64()),
        ("batched_entries", pa.int64()),
        ("records", pa.int64()),
        ("live_records", pa.int64()),
        ("bytes", pa.int64()),
        ("mark_delete", pa.string()),
        ("reclaimable_bytes", pa.int64()),
    ]
)


def transaction_log_table(dd: DataDir) -> Any:
    """Per coordinator log topic: ledgers, entries, records (and how many are not yet deleted),
    bytes, and the bytes trimming would free."""
    return pa.Table.from_pylist(list(transaction_log_rows(dd)), schema=TRANSACTION_LOG_SCHEMA)


def pending_ack_rows(dd: DataDir) -> Iterator[dict[str, Any]]:
    """Per pending-ack store: its records, how many lie after the store's mark-delete (what a broker
    replays on load), the transactions still holding acknowledgements, and the subscription's own
    mark-delete, which the store trims against (``MLPendingAckStore.clearUselessLogData``)."""
    for ml in dd.managed_ledger_names():
        if ml_kind(ml) != "pending_ack":
            continue
        base = ml[: -len(PENDING_ACK_SUFFIX)]
        owner = next(
            (
                (t, c)
                for t in dd.managed_ledger_names()
                if base.startswith(t + "-")
                for c in dd.cursors(t)
                if base == f"{t}-{c.name}"
            ),
            None,
        )
        store_cursor = _log_cursor(dd, ml, PENDING_ACK_CURSOR)
        ledgers, entries, size = _ml_bytes(dd, ml)
        records = after = 0
        replayed = PendingAcks()
        max_acked: Position | None = None
        for pos, recs in dd.ml_records(ml, decode_pending_ack_entry, "bad_pending_ack_entry"):
            for r in recs:
                records += 1
                after += store_cursor is None or pos > store_cursor.mark_delete
                replayed.apply(r)
                for p in r.positions:
                    acked = Position(p.ledger_id, p.entry_id)
                    max_acked = acked if max_acked is None else max(max_acked, acked)
        open_txns = {key: len(held) for key, held in replayed.open.items()}
        yield {
            "topic": ml_to_topic(owner[0]) if owner else None,
            "subscription": owner[1].name if owner else None,
            "store": ml_to_topic(ml),
            "ledgers": ledgers,
            "entries": entries,
            "records": records,
            "records_after_mark_delete": after,
            "bytes": size,
            "store_mark_delete": str(store_cursor.mark_delete) if store_cursor else None,
            "subscription_mark_delete": str(owner[1].mark_delete) if owner else None,
            "max_acked_position": str(max_acked) if max_acked else None,
            "open_transactions": [f"({m},{lo})" for m, lo in sorted(open_txns)],
            "open_acked_positions": sum(open_txns.values()),
        }


PENDING_ACK_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("subscription", pa.string()),
        ("store", pa.string()),
        ("ledgers", pa.int64()),
        ("entries", pa.int64()),
        ("records", pa.int64()),
        ("records_after_mark_delete", pa.int64()),
        ("bytes", pa.int64()),
        ("store_mark_delete", pa.string()),
        ("subscription_mark_delete", pa.string()),
        ("max_acked_position", pa.string()),
        ("open_transactions", pa.list_(pa.string())),
        ("open_acked_positions", pa.int64()),
    ]
)


def pending_ack_table(dd: DataDir) -> Any:
    """Per subscription with a pending-ack store (see :func:`pending_ack_rows`)."""
    return pa.Table.from_pylist(list(pending_ack_rows(dd)), schema=PENDING_ACK_SCHEMA)


__all__ = [
    "PENDING_ACK_CURSOR",
    "PENDING_ACK_SCHEMA",
    "TRANSACTIONS_SCHEMA",
    "TRANSACTION_LOG_SCHEMA",
    "TRANSACTION_LOG_CURSOR",
    "Transaction",
    "pending_ack_rows",
    "pending_ack_table",
    "transaction_log_rows",
    "transaction_log_table",
    "transaction_rows",
    "transactions",
    "transactions_table",
]
