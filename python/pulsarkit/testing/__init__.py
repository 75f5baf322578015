"""Test helpers that ship with pulsarkit: an in-process fake Pulsar broker for real clients."""

from .fake_broker import (
    OWN_PROTOCOL_VERSION,
    BrokerError,
    DispatchedMessage,
    FakeBroker,
    RecordedSend,
    StoredEntry,
)

__all__ = [
    "OWN_PROTOCOL_VERSION",
    "BrokerError",
    "DispatchedMessage",
    "FakeBroker",
    "RecordedSend",
    "StoredEntry",
]
