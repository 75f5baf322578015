"""Pulsar's transaction records as stored in ledgers: the transaction coordinator's log
(``TransactionMetadataEntry``) and the pending-ack store (``PendingAckMetadataEntry``), each either
one record per entry or a PIP-160 batch (``0x0e01`` magic, ``0x0001`` version, then a
``Batched...Entry`` of records); and the marker types transactions leave in topics.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from ..errors import PulsarkitError

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


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise PulsarkitError(f"truncated varint at offset {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _pb_fields(buf: bytes) -> Iterator[tuple[int, Any]]:
    """(field number, value) of a protobuf message: ints for varints/fixed, bytes for length-delimited."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        fno, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
        elif wt == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise PulsarkitError(f"field {fno}: {n} bytes at offset {pos} exceed the message")
            v, pos = buf[pos : pos + n], pos + n
        elif wt == 1:
            v, pos = struct.unpack_from("<q", buf, pos)[0], pos + 8
        elif wt == 5:
            v, pos = struct.unpack_from("<i", buf, pos)[0], pos + 4
        else:
            raise PulsarkitError(f"unsupported wire type {wt} at offset {pos}")
        yield fno, v


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
    for fno, v in _pb_fields(buf):
        if fno in names:
            d[names[fno]] = v
        elif fno == 6:
            d["partitions"].append(bytes(v).decode("utf-8", "replace"))
        elif fno == 7:
            sub = {1: "topic", 2: "subscription"}
            d["subscriptions"].append(
                {sub[f]: bytes(x).decode("utf-8", "replace") for f, x in _pb_fields(v) if f in sub}
            )
        elif fno == 12:
            d["owner"] = bytes(v).decode("utf-8", "replace")
    return d


def decode_txn_log_entry(data: bytes) -> list[dict[str, Any]]:
    """The ``TransactionMetadataEntry`` records of one coordinator-log entry: a PIP-160 batch
    (``0x0e01 0x0001`` + ``BatchedTransactionMetadataEntry``) or a single record."""
    try:
        if data[:2] == _BATCHED_PREFIX and len(data) >= 4:
            return [_txn_metadata_entry(bytes(v)) for f, v in _pb_fields(data[4:]) if f == 1]
        return [_txn_metadata_entry(data)]
    except (PulsarkitError, struct.error, IndexError) as e:
        raise PulsarkitError(f"not a transaction-log entry: {e}") from None


def decode_pending_ack_entry(data: bytes) -> list[dict[str, Any]]:
    """The ``PendingAckMetadataEntry`` records of one pending-ack store entry (batched or single)."""

    def one(buf: bytes) -> dict[str, Any]:
        d: dict[str, Any] = {"op": None, "ack_type": None, "least_bits": 0, "most_bits": 0, "positions": []}
        for fno, v in _pb_fields(buf):
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
                for f2, x in _pb_fields(v):
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

    try:
        if data[:2] == _BATCHED_PREFIX and len(data) >= 4:
            return [one(bytes(v)) for f, v in _pb_fields(data[4:]) if f == 1]
        return [one(data)]
    except (PulsarkitError, struct.error, IndexError) as e:
        raise PulsarkitError(f"not a pending-ack entry: {e}") from None


__all__ = ["MARKER_TYPES", "TXN_ABORT_MARKER", "TXN_COMMIT_MARKER", "TXN_STATUS", "decode_pending_ack_entry", "decode_txn_log_entry"]
