"""Test helpers: an in-process fake Pulsar broker for real clients (not part of the wheel)."""

from .connection import OWN_PROTOCOL_VERSION
from .fake_broker import FakeBroker
from .state import BrokerError, DispatchedMessage, RecordedSend

__all__ = [
    "OWN_PROTOCOL_VERSION",
    "BrokerError",
    "DispatchedMessage",
    "FakeBroker",
    "RecordedSend",
]
