"""Pulsar's transaction records as stored in ledgers: the transaction coordinator's log
(``TransactionMetadataEntry``) and the pending-ack store (``PendingAckMetadataEntry``), each either
one record per entry or a PIP-160 batch (``0x0e01`` magic, ``0x0001`` version, then a
``Batched...Entry`` of records); and the marker types transactions leave in topics.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ..errors import PulsarkitError
from .protobuf_wire import fields

#: TxnStatus of PulsarTransactionMetadata.proto.
TXN_STATUS = {0: "OPEN", 1: "COMMITTING", 2: "COMMITTED", 3: "ABORTING", 4: "ABORTED"}
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
_BATCHED_PREFIX = b"\x0e\x01"


def _txn_metadata_entry(buf: bytes) -> dict[str, Any]:
    """``TransactionMetadataEntry`` (PulsarTransactionMetadata.proto) as a dict."""
    d: dict[str, Any] = {
        "op": 0,
        "least_bits": 0,
        "most_bits": 0,
        "expected_status": None,
        "new_status": None,
        "partitions": [],
        "subscriptions": [],
        "timeout_ms": None,
        "start_time": None,
        "last_modification_time": None,
    }
    names = {
        1: "op",
        2: "least_bits",
        3: "most_bits",
        4: "expected_status",
        5: "new_status",
        8: "timeout_ms",
        9: "start_time",
        10: "last_modification_time",
        11: "max_local_txn_id",
    }
    for fno, v in fields(buf):
        if fno in names:
            d[names[fno]] = v
        elif fno == 6:
            d["partitions"].append(bytes(v).decode("utf-8", "replace"))
        elif fno == 7:
            sub = {1: "topic", 2: "subscription"}
            d["subscriptions"].append({sub[f]: bytes(x).decode("utf-8", "replace") for f, x in fields(v) if f in sub})
        elif fno == 12:
            d["owner"] = bytes(v).decode("utf-8", "replace")
    return d


def _records(data: bytes, one: Callable[[bytes], dict[str, Any]], what: str) -> list[dict[str, Any]]:
    """The records of a PIP-160 batched entry (``0x0e01 0x0001`` + a message of repeated field 1),
    or the entry as one record."""
    try:
        if data[:2] == _BATCHED_PREFIX and len(data) >= 4:
            return [one(bytes(v)) for f, v in fields(data[4:]) if f == 1]
        return [one(data)]
    except (PulsarkitError, struct.error, IndexError) as e:
        raise PulsarkitError(f"not a {what} entry: {e}") from None


def decode_txn_log_entry(data: bytes) -> list[dict[str, Any]]:
    """The ``TransactionMetadataEntry`` records of one coordinator-log entry: a PIP-160 batch
    (``BatchedTransactionMetadataEntry``) or a single record."""
    return _records(data, _txn_metadata_entry, "transaction-log")


def decode_pending_ack_entry(data: bytes) -> list[dict[str, Any]]:
    """The ``PendingAckMetadataEntry`` records of one pending-ack store entry (batched or single)."""

    def one(buf: bytes) -> dict[str, Any]:
        d: dict[str, Any] = {"op": None, "ack_type": None, "least_bits": 0, "most_bits": 0, "positions": []}
        for fno, v in fields(buf):
            if fno == 1:
                d["op"] = v
            elif fno == 2:
                d["ack_type"] = v
            elif fno == 3:
                d["least_bits"] = v
            elif fno == 4:
                d["most_bits"] = v
            elif fno == 5:
                p: dict[str, Any] = {"ack_set": []}
                for f2, x in fields(v):
                    if f2 == 1:
                        p["ledger_id"] = x
                    elif f2 == 2:
                        p["entry_id"] = x
                    elif f2 == 3:
                        p["ack_set"].append(x - (1 << 64) if x >> 63 else x)
                    elif f2 == 4:
                        p["batch_size"] = x
                d["positions"].append(p)
        return d

    return _records(data, one, "pending-ack")


__all__ = [
    "MARKER_TYPES",
    "TXN_ABORT_MARKER",
    "TXN_COMMIT_MARKER",
    "TXN_STATUS",
    "decode_pending_ack_entry",
    "decode_txn_log_entry",
]
