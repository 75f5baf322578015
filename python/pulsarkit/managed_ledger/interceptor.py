"""The hook a managed ledger calls around adds and metadata updates (Pulsar's
``ManagedLedgerInterceptor``). The managed ledger only defines it; the broker implements it (PIP-70
broker entry metadata, :mod:`pulsarkit.broker.interceptors`), so storage never depends on the broker."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Protocol, runtime_checkable


@runtime_checkable
class ManagedLedgerInterceptor(Protocol):
    def before_add_entry(self, data: bytes, number_of_messages: int) -> bytes:
        """The bytes to store for an entry of ``number_of_messages`` messages."""
        ...

    def after_failed_add_entry(self, number_of_messages: int) -> None:
        """An add that :meth:`before_add_entry` saw did not happen."""
        ...

    def on_managed_ledger_properties_initialize(self, properties: Mapping[str, str]) -> None:
        """The managed ledger's stored properties, at open."""
        ...

    def on_managed_ledger_last_ledger_initialize(self, last_entry: bytes | None) -> None:
        """The last stored entry (None when there is none), at open."""
        ...

    def on_update_managed_ledger_info(self, properties: MutableMapping[str, str]) -> None:
        """Properties about to be stored with ``ManagedLedgerInfo``; may add to them."""
        ...


__all__ = ["ManagedLedgerInterceptor"]
