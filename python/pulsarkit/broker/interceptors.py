"""PIP-70 broker entry metadata interceptors, selectable by the class names Pulsar's
``brokerEntryMetadataInterceptors`` setting uses, and :class:`ManagedLedgerInterceptorImpl`, the
broker's implementation of the managed ledger's interceptor hook: it adds their metadata to each
entry, rolls the index back when an add fails and recovers it after a restart."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Protocol

from ..codec.entry import Buffer, add_broker_entry_metadata, peek_broker_entry_metadata
from ..errors import PulsarkitError

TIMESTAMP_INTERCEPTOR = "org.apache.pulsar.common.intercept.AppendBrokerTimestampMetadataInterceptor"
INDEX_INTERCEPTOR = "org.apache.pulsar.common.intercept.AppendIndexMetadataInterceptor"

#: Managed-ledger property under which the index survives a restart.
INDEX_PROPERTY = "index"


class BrokerEntryMetadataBuilder:
    """The mutable BrokerEntryMetadata an interceptor fills in (Pulsar's thread-local BEM)."""

    __slots__ = ("broker_timestamp", "index")

    def __init__(self) -> None:
        self.broker_timestamp: int | None = None
        self.index: int | None = None


class BrokerEntryMetadataInterceptor(Protocol):
    def intercept(self, bem: BrokerEntryMetadataBuilder) -> None: ...
    def intercept_with_number_of_messages(self, bem: BrokerEntryMetadataBuilder, number_of_messages: int) -> None: ...


class AppendBrokerTimestampMetadataInterceptor:
    """Sets ``broker_timestamp`` to the broker's wall clock at add time (not guaranteed monotonic)."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock or (lambda: int(time.time() * 1000))

    def intercept(self, bem: BrokerEntryMetadataBuilder) -> None:
        bem.broker_timestamp = self._clock()

    def intercept_with_number_of_messages(self, bem: BrokerEntryMetadataBuilder, number_of_messages: int) -> None:
        pass


class AppendIndexMetadataInterceptor:
    """Continuous index: starts at -1 and each add sets ``index = index + number_of_messages``, so an
    entry's index is the 0-based index of its last message."""

    def __init__(self) -> None:
        self._index = -1

    @property
    def index(self) -> int:
        return self._index

    def intercept(self, bem: BrokerEntryMetadataBuilder) -> None:
        pass

    def intercept_with_number_of_messages(self, bem: BrokerEntryMetadataBuilder, number_of_messages: int) -> None:
        self._index += number_of_messages
        bem.index = self._index

    def recovery_index_generator(self, index: int) -> None:
        """Only ever raises the generator (recovery from properties and from the last entry)."""
        self._index = max(self._index, index)

    def decrease_with_number_of_messages(self, number_of_messages: int) -> None:
        self._index -= number_of_messages


_REGISTRY: dict[str, Callable[..., BrokerEntryMetadataInterceptor]] = {
    TIMESTAMP_INTERCEPTOR: AppendBrokerTimestampMetadataInterceptor,
    INDEX_INTERCEPTOR: AppendIndexMetadataInterceptor,
    "AppendBrokerTimestampMetadataInterceptor": AppendBrokerTimestampMetadataInterceptor,
    "AppendIndexMetadataInterceptor": AppendIndexMetadataInterceptor,
}


def create_interceptors(
    names: Iterable[str | BrokerEntryMetadataInterceptor], clock: Callable[[], int] | None = None
) -> list[BrokerEntryMetadataInterceptor]:
    """Interceptors from Pulsar class names (as in ``brokerEntryMetadataInterceptors``) or instances.
    Each call creates a new index interceptor, as the broker does per topic."""
    out: list[BrokerEntryMetadataInterceptor] = []
    for n in names:
        if not isinstance(n, str):
            out.append(n)
            continue
        factory = _REGISTRY.get(n.strip())
        if factory is None:
            raise PulsarkitError(
                f"unknown broker entry metadata interceptor {n!r}; known: {TIMESTAMP_INTERCEPTOR}, {INDEX_INTERCEPTOR}"
            )
        out.append(factory(clock) if factory is AppendBrokerTimestampMetadataInterceptor else factory())
    return out


class ManagedLedgerInterceptorImpl:
    """The broker's :class:`~pulsarkit.managed_ledger.interceptor.ManagedLedgerInterceptor`
    (``ManagedLedgerInterceptorImpl``): broker entry metadata around managed-ledger adds."""

    def __init__(self, interceptors: Iterable[BrokerEntryMetadataInterceptor]) -> None:
        self.interceptors = list(interceptors)
        self.index_interceptor = next(
            (i for i in self.interceptors if isinstance(i, AppendIndexMetadataInterceptor)), None
        )

    def before_add_entry(self, data: Buffer, number_of_messages: int) -> bytes:
        """Prefixes broker entry metadata; nothing is added when ``number_of_messages <= 0``."""
        if number_of_messages <= 0 or not self.interceptors:
            return bytes(data)
        bem = BrokerEntryMetadataBuilder()
        for i in self.interceptors:
            i.intercept(bem)
            i.intercept_with_number_of_messages(bem, number_of_messages)
        return add_broker_entry_metadata(data, bem.broker_timestamp, bem.index)

    def after_failed_add_entry(self, number_of_messages: int) -> None:
        if self.index_interceptor is not None and number_of_messages > 0:
            self.index_interceptor.decrease_with_number_of_messages(number_of_messages)

    def on_managed_ledger_properties_initialize(self, properties: Mapping[str, str]) -> None:
        if self.index_interceptor is not None and INDEX_PROPERTY in properties:
            self.index_interceptor.recovery_index_generator(int(properties[INDEX_PROPERTY]))

    def on_managed_ledger_last_ledger_initialize(self, last_entry: Buffer | None) -> None:
        if self.index_interceptor is None or last_entry is None:
            return
        bem = peek_broker_entry_metadata(last_entry)
        if bem is not None and bem.index is not None:
            self.index_interceptor.recovery_index_generator(bem.index)

    def on_update_managed_ledger_info(self, properties: MutableMapping[str, str]) -> None:
        if self.index_interceptor is not None:
            properties[INDEX_PROPERTY] = str(self.index_interceptor.index)


def managed_ledger_interceptor(
    names: Iterable[str | BrokerEntryMetadataInterceptor], clock: Callable[[], int] | None = None
) -> ManagedLedgerInterceptorImpl | None:
    """The interceptor for ``ManagedLedgerConfig.managed_ledger_interceptor`` from Pulsar class names
    (``brokerEntryMetadataInterceptors``), or None when there are none. One per managed ledger."""
    interceptors = create_interceptors(names, clock)
    return ManagedLedgerInterceptorImpl(interceptors) if interceptors else None
