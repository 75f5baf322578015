"""Pulsar's transaction records as stored in ledgers: the transaction coordinator's log
(``TransactionMetadataEntry``) and the pending-ack stores (``PendingAckMetadataEntry``), each either
one record per entry or a PIP-160 batch (``0E 01 00 01`` then a ``Batched...Entry`` of records); and
the marker types transactions leave in topics.

Decoding is the native record kernel (one implementation for single entries and Arrow columns);
records are built with the protobuf classes of :mod:`pulsarkit.proto`, which share its ``.proto`` files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _native
from ..errors import PulsarkitError
from ..proto import PendingAckMetadata, PendingAckMetadataEntry, Subscription, TransactionMetadataEntry
from .columns import binary_array

#: TxnStatus of PulsarTransactionMetadata.proto.
TXN_STATUS = {0: "OPEN", 1: "COMMITTING", 2: "COMMITTED", 3: "ABORTING", 4: "ABORTED"}
TXN_STATUS_VALUE = {v: k for k, v in TXN_STATUS.items()}
#: TransactionMetadataEntry.TransactionMetadataOp.
TXN_OPS = {0: "NEW", 1: "ADD_PARTITION", 2: "ADD_SUBSCRIPTION", 3: "UPDATE"}
TXN_OP_VALUE = {v: k for k, v in TXN_OPS.items()}
#: PendingAckOp of TransactionPendingAck.proto.
PENDING_ACK_OPS = {1: "ACK", 2: "COMMIT", 3: "ABORT"}
PENDING_ACK_OP_VALUE = {v: k for k, v in PENDING_ACK_OPS.items()}
#: CommandAck.AckType.
ACK_TYPES = {0: "Individual", 1: "Cumulative"}
ACK_TYPE_VALUE = {v: k for k, v in ACK_TYPES.items()}
#: MarkerType of PulsarApi.proto.
MARKER_TYPES = {
    10: "REPLICATED_SUBSCRIPTION_SNAPSHOT_REQUEST",
    11: "REPLICATED_SUBSCRIPTION_SNAPSHOT_RESPONSE",
    12: "REPLICATED_SUBSCRIPTION_SNAPSHOT",
    13: "REPLICATED_SUBSCRIPTION_UPDATE",
    20: "TXN_COMMITTING",
    21: "TXN_COMMIT",
    22: "TXN_ABORT",
}
#: The markers that end a transaction in a topic.
TXN_COMMIT_MARKER, TXN_ABORT_MARKER = 21, 22
#: The first four bytes of a PIP-160 batched entry (magic 0x0e01, version 1).
BATCHED_ENTRY_PREFIX = b"\x0e\x01\x00\x01"


def pack_batched_entry(records: Sequence[bytes]) -> bytes:
    """One batched entry from serialized records (``TxnLogBufferedWriter.doFlush``)."""
    return _native.pack_batched_txn_entry(list(records))


def split_entry(data: bytes) -> tuple[bool, list[bytes]]:
    """``(batched, records)`` of one entry. A first short other than ``0x0e01`` is one plain record;
    a batched entry of a version other than 1 is reported, not guessed at."""
    return _native.split_txn_entry(data)


def _one_entry(kernel: Any, data: bytes, what: str) -> list[dict[str, Any]]:
    rows = kernel(binary_array([bytes(data)])).to_pylist()
    if rows and rows[0]["error"] is not None:
        raise PulsarkitError(f"not a {what} entry: {rows[0]['error']}")
    for r in rows:
        del r["entry_index"], r["error"]
    return rows


# The records are frozen and hold tuples, not lists: they are values (hashable, comparable, safe to share).


@dataclass(frozen=True)
class RecordPlace:
    """Where a record sits in its entry: alone (``batched`` False, index 0 of 1) or in a PIP-160 batch."""

    batched: bool
    batch_size: int
    batch_index: int
    #: the serialized record's size
    record_bytes: int


@dataclass(frozen=True)
class TxnSubscription:
    topic: str
    subscription: str


@dataclass(frozen=True)
class TxnLogRecord(RecordPlace):
    """One ``TransactionMetadataEntry`` of a coordinator's log (the columns of
    :func:`pulsarkit.bulk.explode_transaction_log`); statuses and ops by name."""

    op: str
    txnid_most_bits: int
    txnid_least_bits: int
    expected_status: str | None
    new_status: str | None
    partitions: tuple[str, ...]
    subscriptions: tuple[TxnSubscription, ...]
    timeout_ms: int | None
    start_time: int | None
    last_modification_time: int | None
    max_local_txn_id: int | None
    owner: str | None
    is_timeout: bool | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> TxnLogRecord:
        subs = tuple(TxnSubscription(s["topic"], s["subscription"]) for s in row.pop("subscriptions") or ())
        parts = tuple(row.pop("partitions") or ())
        return cls(**row, partitions=parts, subscriptions=subs)


@dataclass(frozen=True)
class AckedPosition:
    """A position a pending-ack record acknowledges; ``ack_set`` (long words) for part of a batch."""

    ledger_id: int
    entry_id: int
    ack_set: tuple[int, ...] | None
    batch_size: int | None


@dataclass(frozen=True)
class PendingAckRecord(RecordPlace):
    """One ``PendingAckMetadataEntry`` of a subscription's pending-ack store (the columns of
    :func:`pulsarkit.bulk.explode_pending_ack_log`)."""

    op: str
    ack_type: str | None
    txnid_most_bits: int | None
    txnid_least_bits: int | None
    positions: tuple[AckedPosition, ...]

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> PendingAckRecord:
        positions = tuple(
            AckedPosition(**{**p, "ack_set": None if p["ack_set"] is None else tuple(p["ack_set"])})
            for p in row.pop("positions") or ()
        )
        return cls(**row, positions=positions)


def decode_txn_log_entry(data: bytes) -> list[TxnLogRecord]:
    """The ``TransactionMetadataEntry`` records of one coordinator-log entry."""
    return [TxnLogRecord.from_row(r) for r in _one_entry(_native.bulk_explode_transaction_log, data, "transaction-log")]


def decode_pending_ack_entry(data: bytes) -> list[PendingAckRecord]:
    """The ``PendingAckMetadataEntry`` records of one pending-ack store entry (batched or single)."""
    return [PendingAckRecord.from_row(r) for r in _one_entry(_native.bulk_explode_pending_ack_log, data, "pending-ack")]


def txn_metadata_record(
    op: str,
    txnid: tuple[int, int],
    *,
    expected_status: str | None = None,
    new_status: str | None = None,
    partitions: Iterable[str] = (),
    subscriptions: Iterable[tuple[str, str]] = (),
    timeout_ms: int | None = None,
    start_time: int | None = None,
    last_modification_time: int | None = None,
    max_local_txn_id: int | None = None,
    owner: str | None = None,
    is_timeout: bool | None = None,
) -> bytes:
    """A serialized ``TransactionMetadataEntry``; ``txnid`` is ``(most_bits, least_bits)``."""
    m = TransactionMetadataEntry(metadata_op=TXN_OP_VALUE[op], txnid_most_bits=txnid[0], txnid_least_bits=txnid[1])
    if expected_status is not None:
        m.expected_status = TXN_STATUS_VALUE[expected_status]
    if new_status is not None:
        m.new_status = TXN_STATUS_VALUE[new_status]
    m.partitions.extend(partitions)
    m.subscriptions.extend(Subscription(topic=t, subscription=s) for t, s in subscriptions)
    for name, v in (
        ("timeout_ms", timeout_ms),
        ("start_time", start_time),
        ("last_modification_time", last_modification_time),
        ("max_local_txn_id", max_local_txn_id),
        ("owner", owner),
        ("is_timeout", is_timeout),
    ):
        if v is not None:
            setattr(m, name, v)
    return m.SerializeToString()


def pending_ack_record(
    op: str,
    txnid: tuple[int, int],
    positions: Iterable[tuple[int, int, Sequence[int] | None, int | None]] = (),
    ack_type: str = "Individual",
) -> bytes:
    """A serialized ``PendingAckMetadataEntry``; positions are ``(ledger_id, entry_id, ack_set words or
    None, batch_size or None)``."""
    m = PendingAckMetadataEntry(
        pending_ack_op=PENDING_ACK_OP_VALUE[op],
        ack_type=ACK_TYPE_VALUE[ack_type],
        txnid_most_bits=txnid[0],
        txnid_least_bits=txnid[1],
    )
    for lid, eid, ack_set, batch_size in positions:
        p = PendingAckMetadata(ledgerId=lid, entryId=eid)
        p.ack_set.extend(ack_set or ())
        if batch_size is not None:
            p.batch_size = batch_size
        m.pending_ack_metadata.append(p)
    return m.SerializeToString()


__all__ = [
    "ACK_TYPES",
    "AckedPosition",
    "BATCHED_ENTRY_PREFIX",
    "MARKER_TYPES",
    "PENDING_ACK_OPS",
    "PendingAckRecord",
    "RecordPlace",
    "TXN_ABORT_MARKER",
    "TXN_COMMIT_MARKER",
    "TXN_OPS",
    "TXN_STATUS",
    "TxnLogRecord",
    "TxnSubscription",
    "decode_pending_ack_entry",
    "decode_txn_log_entry",
    "pack_batched_entry",
    "pending_ack_record",
    "split_entry",
    "txn_metadata_record",
]
