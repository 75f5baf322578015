"""Small helpers the tests share (fixtures are in conftest.py)."""

from __future__ import annotations

import pulsarkit as pk

#: A fixed wall-clock time (ms) the storage tests start from.
T0 = 1_700_000_000_000
MiB = 1024 * 1024
TIMESTAMP_INTERCEPTOR = "org.apache.pulsar.common.intercept.AppendBrokerTimestampMetadataInterceptor"
INDEX_INTERCEPTOR = "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor"


class Clock:
    """A settable clock in ms, given to stores, managed ledgers and topics."""

    def __init__(self, t: int = T0) -> None:
        self.t = t

    def __call__(self) -> int:
        return self.t


def ml_config(**kw) -> pk.ManagedLedgerConfig:
    """A managed-ledger config that rolls over without the 10-minute minimum age."""
    kw.setdefault("minimum_rollover_time_ms", 0)
    return pk.ManagedLedgerConfig(**kw)


def entry(publish_time: int, payload: bytes = b"x", producer: str = "producer") -> bytes:
    """A single-message Pulsar entry published at ``publish_time``."""
    return pk.encode_entry(pk.message_metadata(producer, 0, publish_time), payload)
